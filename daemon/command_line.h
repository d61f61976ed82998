// larderd's command line. The flag names are relied on by scripts and
// admins; do not rename them:
//   --model PATH  --host H  --port N  --cache-dir DIR  --config FILE
//   --threads N   --ctx N   --log-level L  --api-key-file FILE
//   --print-config  --help  --version
//
// Precedence: built-in defaults < config file < flags. The config file is
// --config FILE, else the file named by $LARDER_CONFIG, else none:
// ./config/larder.toml is never read implicitly.
#pragma once

#include <string>

#include "daemon/config.h"
#include "storage/status.h"

namespace larder {

struct CommandLine {
  DaemonConfig config;      // defaults + file + flags
  std::string config_path;  // the config file that was read; "" when none
  // --help, --version or --print-config: print `output` to stdout and exit 0.
  bool exit_now = false;
  std::string output;
};

// Parses argv (argv[0] is the program name). `defaults` is normally
// default_config(). Reads $LARDER_CONFIG when --config is absent.
// Errors (kInvalidArgument unless noted), each message ready to print after
// "larderd: ": an unknown flag or a missing flag value ("... see --help"),
// a flag value out of range ("--port 70000: must be an integer between 0
// and 65535 ..."), a config file that cannot be read (kNotFound / kIOError,
// naming the file) or that has an error (see load_config_file).
Result<CommandLine> parse_command_line(int argc, const char* const* argv,
                                       const DaemonConfig& defaults);

}  // namespace larder
