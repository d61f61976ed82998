// The clock the reference renderings were made with
// (scripts/template/render_reference.py, scripts/chat/render_chat.py):
// 2024-07-26 09:30:00, a Friday. Chat templates that print today's date
// (Llama 3.x) get it through strftime_now, so renderings compare byte for byte.
#pragma once

#include <ctime>
#include <string>

namespace larder::testing {

inline std::string fixed_strftime(const std::string& format) {
  std::tm tm{};
  tm.tm_year = 2024 - 1900;
  tm.tm_mon = 6;
  tm.tm_mday = 26;
  tm.tm_hour = 9;
  tm.tm_min = 30;
  tm.tm_wday = 5;
  tm.tm_yday = 207;
  char buf[256];
  return std::string(buf, std::strftime(buf, sizeof buf, format.c_str(), &tm));
}

}  // namespace larder::testing
