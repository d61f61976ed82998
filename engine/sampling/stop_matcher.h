// Stop strings over a stream of text deltas (OpenAI `stop`): the text before
// the first stop string reaches the client, the stop string and everything
// after it never do.
//
// Text that could still be the start of a stop string is held back until the
// next delta decides it. Matching is on bytes; with valid UTF-8 input and stop
// strings a held-back part always starts on a character boundary. As a
// safeguard for deltas that end inside a character, an incomplete trailing
// UTF-8 sequence is held back too, so released text never splits a character.
//
// Cost per push: O((|held| + |delta|) * n_stops * max stop length) at worst;
// the held part is shorter than the longest stop string (plus < 4 bytes).
// Not thread-safe: one StopMatcher per request.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace larder {

class StopMatcher {
 public:
  // stops: UTF-8 stop strings; empty strings are ignored.
  explicit StopMatcher(std::vector<std::string> stops);

  struct Output {
    std::string text;      // safe to send now (may be empty)
    bool stopped = false;  // a stop string completed; text = everything before it
  };

  // Feeds the next text delta. When a stop string completes (also across
  // several deltas), returns stopped = true with the text up to the earliest
  // stop occurrence; the matcher is then finished: later pushes return
  // {"", true} and flush() returns "".
  Output push(std::string_view delta);

  // End of generation without a stop: returns the held-back text.
  std::string flush();

  bool stopped() const { return stopped_; }
  size_t held_bytes() const { return pending_.size(); }

 private:
  // Length of the longest suffix of pending_ that is a proper prefix of a
  // stop string (0 if none).
  size_t held_prefix_length() const;

  std::vector<std::string> stops_;
  size_t max_stop_bytes_ = 0;
  std::string pending_;  // received, not yet released
  bool stopped_ = false;
};

}  // namespace larder
