#include "engine/sampling/stop_matcher.h"

#include <algorithm>
#include <utility>

namespace larder {
namespace {

// Where to cut `s` at or before `cut` so that s[0, cut) does not end inside a
// UTF-8 sequence. Bytes that are not valid lead bytes are left to the caller.
size_t utf8_safe_cut(const std::string& s, size_t cut) {
  const size_t lowest = cut >= 4 ? cut - 4 : 0;
  for (size_t j = cut; j > lowest; --j) {
    const auto b = static_cast<unsigned char>(s[j - 1]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    size_t len = 1;
    if ((b & 0xE0) == 0xC0) {
      len = 2;
    } else if ((b & 0xF0) == 0xE0) {
      len = 3;
    } else if ((b & 0xF8) == 0xF0) {
      len = 4;
    }
    return (j - 1) + len > cut ? j - 1 : cut;
  }
  return cut;
}

}  // namespace

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (std::string& s : stops) {
    if (s.empty()) continue;
    max_stop_bytes_ = std::max(max_stop_bytes_, s.size());
    stops_.push_back(std::move(s));
  }
}

size_t StopMatcher::held_prefix_length() const {
  if (max_stop_bytes_ == 0) return 0;
  const size_t longest = std::min(pending_.size(), max_stop_bytes_ - 1);
  const std::string_view pending(pending_);
  for (size_t len = longest; len > 0; --len) {
    const std::string_view suffix = pending.substr(pending.size() - len);
    for (const std::string& s : stops_) {
      if (s.size() > len && std::string_view(s).substr(0, len) == suffix) return len;
    }
  }
  return 0;
}

StopMatcher::Output StopMatcher::push(std::string_view delta) {
  Output out;
  if (stopped_) {
    out.stopped = true;
    return out;
  }
  pending_.append(delta);

  size_t earliest = std::string::npos;
  for (const std::string& s : stops_) earliest = std::min(earliest, pending_.find(s));
  if (earliest != std::string::npos) {
    pending_.resize(earliest);
    out.text = std::move(pending_);
    pending_.clear();
    out.stopped = true;
    stopped_ = true;
    return out;
  }

  const size_t cut = utf8_safe_cut(pending_, pending_.size() - held_prefix_length());
  out.text = pending_.substr(0, cut);
  pending_.erase(0, cut);
  return out;
}

std::string StopMatcher::flush() {
  if (stopped_) return {};
  return std::exchange(pending_, std::string());
}

}  // namespace larder
