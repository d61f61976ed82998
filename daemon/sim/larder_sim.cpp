// larder-sim: replays a page-access trace (cache.trace_file; format in
// storage/cache_sim.h) under one or more candidate configs and prints, per
// tier, the hit rate the candidate would get next to what the daemon
// measured while recording, and the tokens restored vs prefilled.
//   larder-sim --trace FILE [--config candidate.toml ...]
// Without --config the built-in defaults are replayed. Exit status: 0, 1 for
// an unreadable or malformed trace, 2 for a usage or config error.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "daemon/config.h"
#include "storage/cache_sim.h"

namespace {

int usage() {
  std::fputs("usage: larder-sim --trace FILE [--config candidate.toml ...]\n"
             "Replays a page-access trace (set cache.trace_file in larderd's config to record one)\n"
             "under each candidate config and prints hit rates per tier; see docs/cache-tuning.md.\n",
             stderr);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string trace;
  std::vector<std::string> configs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--trace" || a == "--config") && i + 1 < argc) {
      (a == "--trace" ? trace : configs.emplace_back()) = argv[++i];
    } else if (a == "--help" || a == "-h") {
      usage();
      return 0;
    } else {
      std::fprintf(stderr, "larder-sim: unknown argument %s\n", a.c_str());
      return usage();
    }
  }
  if (trace.empty()) return usage();
  if (configs.empty()) configs.emplace_back();
  for (const std::string& path : configs) {
    larder::DaemonConfig config = larder::default_config();
    if (!path.empty()) {
      auto loaded = larder::load_config_file(path, config);
      if (!loaded.is_ok()) {
        std::fprintf(stderr, "larder-sim: %s\n", loaded.status().message().c_str());
        return 2;
      }
      config = std::move(*loaded);
    }
    std::ifstream in(trace);
    if (!in) {
      std::fprintf(stderr, "larder-sim: cannot read %s\n", trace.c_str());
      return 1;
    }
    auto result = larder::simulate_trace(in, config.engine.cache);
    if (!result.is_ok()) {
      std::fprintf(stderr, "larder-sim: %s: %s\n", trace.c_str(), result.status().message().c_str());
      return 1;
    }
    std::printf("== %s\n%s\n", path.empty() ? "built-in defaults" : path.c_str(),
                larder::format_sim_result(*result, /*with_live=*/true).c_str());
  }
  return 0;
}
