#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/chat_format.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/fuzz/harness.h"

namespace larder::fuzz {

int gguf_file(const uint8_t* data, size_t size) {
  // GgufFile maps a file: hand it the bytes as an in-memory one.
  const int fd = memfd_create("larder-fuzz-gguf", MFD_CLOEXEC);
  if (fd < 0) return 0;
  size_t off = 0;
  while (off < size) {
    const ssize_t n = ::write(fd, data + off, size - off);
    if (n <= 0) break;
    off += size_t(n);
  }
  Result<std::unique_ptr<GgufFile>> f = GgufFile::open("/proc/self/fd/" + std::to_string(fd));
  ::close(fd);
  if (!f.is_ok()) return 0;
  (void)Tokenizer::from_gguf(**f);
  (void)ChatFormat::load(**f);
  return 0;
}

}  // namespace larder::fuzz
