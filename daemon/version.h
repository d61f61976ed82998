// larder's version, shown by `larderd --version` and the startup log.
#pragma once

namespace larder {

inline constexpr const char* kLarderVersion = "0.1.0";

}  // namespace larder
