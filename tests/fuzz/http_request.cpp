#include <string>
#include <vector>

#include "api/http_parser.h"
#include "tests/fuzz/harness.h"

namespace larder::fuzz {

namespace {

struct Parsed {
  std::vector<HttpRequest> requests;
  int error = 0;
  bool refused = false;
};

bool same(const HttpRequest& a, const HttpRequest& b) {
  return a.method == b.method && a.target == b.target && a.headers == b.headers && a.body == b.body &&
         a.http_major == b.http_major && a.http_minor == b.http_minor;
}

// Feeds `bytes` in pieces of `chunk` bytes (0: all at once), taking every
// request as the connection does.
Parsed parse(std::string_view bytes, size_t chunk) {
  const HttpRequestParser::Limits limits{512, 1024};
  // Heads whose target holds "refuse" are refused from the head (as the
  // access checks do), to reach that path too.
  HttpRequestParser parser(limits, {}, {}, [](const HttpRequest& head) {
    LARDER_FUZZ_ASSERT(head.body.empty());
    return head.target.find("refuse") == std::string::npos;
  });
  Parsed out;
  std::string pending;
  size_t next = 0;
  while (out.error == 0) {
    if (pending.empty()) {
      if (next >= bytes.size()) break;
      const size_t n = chunk == 0 ? bytes.size() : std::min(chunk, bytes.size() - next);
      pending.assign(bytes.substr(next, n));
      next += n;
    }
    size_t used = 0;
    const HttpRequestParser::Outcome o = parser.feed(pending, &used);
    LARDER_FUZZ_ASSERT(used <= pending.size());
    pending.erase(0, used);
    if (o == HttpRequestParser::Outcome::kRequest) {
      HttpRequest r = parser.take_request();
      // The limits hold for every request handed out.
      LARDER_FUZZ_ASSERT(r.body.size() <= limits.max_body_bytes);
      LARDER_FUZZ_ASSERT(r.target.size() <= limits.max_head_bytes);
      LARDER_FUZZ_ASSERT(!r.method.empty());
      for (const auto& [name, value] : r.headers) {
        for (char c : name) LARDER_FUZZ_ASSERT(!(c >= 'A' && c <= 'Z'));
      }
      out.requests.push_back(std::move(r));
    } else if (o == HttpRequestParser::Outcome::kRefused) {
      const HttpRequest head = parser.take_request();
      LARDER_FUZZ_ASSERT(head.target.find("refuse") != std::string::npos && head.body.empty());
      out.refused = true;
      out.error = -1;  // ends the loop: the connection ends here
      size_t again = 0;
      LARDER_FUZZ_ASSERT(parser.feed("GET / HTTP/1.1\r\n\r\n", &again) == HttpRequestParser::Outcome::kError);
    } else if (o == HttpRequestParser::Outcome::kError) {
      out.error = parser.error_status();
      LARDER_FUZZ_ASSERT(out.error >= 400 && out.error <= 505 && !parser.error_message().empty());
      size_t again = 0;
      LARDER_FUZZ_ASSERT(parser.feed("GET / HTTP/1.1\r\n\r\n", &again) == HttpRequestParser::Outcome::kError);
    }
  }
  return out;
}

}  // namespace

int http_request(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  const Parsed whole = parse(bytes, 0);
  // How the bytes arrive (TCP may cut them anywhere) changes nothing: the
  // same requests, then the same error.
  const Parsed pieces = parse(bytes, 1 + data[0] % 16);
  LARDER_FUZZ_ASSERT(whole.requests.size() == pieces.requests.size());
  for (size_t i = 0; i < whole.requests.size(); ++i) LARDER_FUZZ_ASSERT(same(whole.requests[i], pieces.requests[i]));
  // The 431 for a head over the limit may come one request apart when the
  // pieces end mid-head, but an error in one is an error in the other.
  LARDER_FUZZ_ASSERT((whole.error == 0) == (pieces.error == 0));
  LARDER_FUZZ_ASSERT(whole.refused == pieces.refused);
  return 0;
}

}  // namespace larder::fuzz
