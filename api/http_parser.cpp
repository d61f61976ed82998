#include "api/http_parser.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <string>
#include <string_view>

#include "api/api_error.h"

namespace larder {

namespace {

// The first coding of a list of them (Transfer-Encoding, Content-Encoding:
// RFC 9110 section 8.4, empty elements allowed, 5.6.1) other than `allowed`,
// lower-cased; nullopt when there is none.
std::optional<std::string> coding_other_than(std::string_view list, std::string_view allowed) {
  for (std::string_view rest = list; !rest.empty();) {
    const size_t comma = std::min(rest.find(','), rest.size());
    std::string coding = ascii_lower(trim_ows(rest.substr(0, comma)));
    rest.remove_prefix(std::min(comma + 1, rest.size()));
    if (!coding.empty() && coding != allowed) return coding;
  }
  return std::nullopt;
}

HttpRequestParser* self(llhttp_t* p) { return static_cast<HttpRequestParser*>(p->data); }


}  // namespace

HttpRequestParser::HttpRequestParser(Limits limits, std::function<void()> on_begin,
                                     std::function<void()> on_continue,
                                     std::function<bool(const HttpRequest& head)> on_head)
    : limits_(limits),
      on_begin_(std::move(on_begin)),
      on_continue_(std::move(on_continue)),
      on_head_(std::move(on_head)) {
  llhttp_init(&parser_, HTTP_REQUEST, &settings());
  parser_.data = this;
}

const llhttp_settings_t& HttpRequestParser::settings() {
  static const llhttp_settings_t kSettings = [] {
    llhttp_settings_t s;
    llhttp_settings_init(&s);
    s.on_message_begin = &HttpRequestParser::on_message_begin;
    s.on_url = &HttpRequestParser::on_url;
    s.on_header_field = &HttpRequestParser::on_header_field;
    s.on_header_value = &HttpRequestParser::on_header_value;
    s.on_headers_complete = &HttpRequestParser::on_headers_complete;
    s.on_body = &HttpRequestParser::on_body;
    s.on_message_complete = &HttpRequestParser::on_message_complete;
    return s;
  }();
  return kSettings;
}

void HttpRequestParser::refuse(int status, std::string message) {
  refuse_status_ = status;
  refuse_message_ = std::move(message);
}

bool HttpRequestParser::count_head_bytes(size_t n) {
  head_bytes_ += n;
  if (head_bytes_ <= limits_.max_head_bytes) return true;
  refuse(431, "the request line and headers exceed " + std::to_string(limits_.max_head_bytes) + " bytes");
  return false;
}

int HttpRequestParser::on_message_begin(llhttp_t* p) {
  HttpRequestParser* c = self(p);
  c->request_ = HttpRequest();
  c->header_field_.clear();
  c->header_value_.clear();
  c->last_was_value_ = false;
  c->head_bytes_ = 0;
  c->in_request_ = true;
  if (c->on_begin_) c->on_begin_();
  return 0;
}

int HttpRequestParser::on_url(llhttp_t* p, const char* at, size_t n) {
  HttpRequestParser* c = self(p);
  if (!c->count_head_bytes(n)) return HPE_USER;
  c->request_.target.append(at, n);
  return 0;
}

int HttpRequestParser::on_header_field(llhttp_t* p, const char* at, size_t n) {
  HttpRequestParser* c = self(p);
  if (!c->count_head_bytes(n)) return HPE_USER;
  if (c->last_was_value_) {
    c->request_.headers.emplace_back(ascii_lower(c->header_field_), std::move(c->header_value_));
    c->header_field_.clear();
    c->header_value_.clear();
    c->last_was_value_ = false;
  }
  c->header_field_.append(at, n);
  return 0;
}

int HttpRequestParser::on_header_value(llhttp_t* p, const char* at, size_t n) {
  HttpRequestParser* c = self(p);
  if (!c->count_head_bytes(n)) return HPE_USER;
  c->header_value_.append(at, n);
  c->last_was_value_ = true;
  return 0;
}

int HttpRequestParser::on_headers_complete(llhttp_t* p) {
  HttpRequestParser* c = self(p);
  HttpRequest& r = c->request_;
  if (!c->header_field_.empty()) {
    r.headers.emplace_back(ascii_lower(c->header_field_), std::move(c->header_value_));
    c->header_field_.clear();
    c->header_value_.clear();
  }
  r.method = llhttp_method_name(static_cast<llhttp_method_t>(p->method));
  r.http_major = p->http_major;
  r.http_minor = p->http_minor;
  if (p->method == HTTP_CONNECT) {
    c->refuse(405, "CONNECT is not supported: larder is not a proxy");
    return -1;
  }
  // An Upgrade (websocket, h2c) is ignored, as RFC 9110 section 7.8 allows:
  // the request is answered as plain HTTP/1.1 and the connection stays HTTP.
  p->upgrade = 0;
  // Codings and expectations larder does not implement are refused, not
  // ignored (a gzip body would reach the JSON parser as binary): RFC 9112
  // section 6.1 (501), RFC 9110 sections 15.5.16 (415) and 10.1.1 (417).
  // A coding of no body (a GET that names one) changes nothing: not refused.
  const bool has_body = (p->flags & F_CHUNKED) || ((p->flags & F_CONTENT_LENGTH) && p->content_length > 0);
  for (const auto& [name, value] : r.headers) {
    if (name == "transfer-encoding") {
      if (std::optional<std::string> coding = coding_other_than(value, "chunked")) {
        c->refuse(501, "Transfer-Encoding '" + clip_for_message(*coding) + "' is not supported: send the body as it "
                       "is (with Content-Length, or chunked)");
        return -1;
      }
    } else if (name == "content-encoding" && has_body && coding_other_than(value, "identity")) {
      c->refuse(415, "Content-Encoding '" + clip_for_message(value) + "' is not supported: send the body uncompressed");
      return -1;
    } else if (name == "expect" && ascii_lower(trim_ows(value)) != "100-continue") {
      c->refuse(417, "Expect '" + clip_for_message(value) + "' is not supported (only 100-continue)");
      return -1;
    }
  }
  if ((p->flags & F_CONTENT_LENGTH) && p->content_length > c->limits_.max_body_bytes) {
    c->refuse(413, "the request body exceeds " + std::to_string(c->limits_.max_body_bytes) + " bytes");
    return -1;
  }
  if (c->on_head_ && !c->on_head_(r)) {
    c->refused_head_ = true;
    return -1;
  }
  const std::string* expect = r.header("expect");
  if (expect && ascii_lower(*expect) == "100-continue" && r.http_minor >= 1 && c->on_continue_) c->on_continue_();
  return 0;
}

size_t HttpRequestParser::declared_body_bytes() const {
  return (parser_.flags & F_CONTENT_LENGTH) ? static_cast<size_t>(parser_.content_length) : 0;
}

int HttpRequestParser::on_body(llhttp_t* p, const char* at, size_t n) {
  HttpRequestParser* c = self(p);
  if (c->request_.body.size() + n > c->limits_.max_body_bytes) {
    c->refuse(413, "the request body exceeds " + std::to_string(c->limits_.max_body_bytes) + " bytes");
    return HPE_USER;
  }
  c->request_.body.append(at, n);
  return 0;
}

int HttpRequestParser::on_message_complete(llhttp_t* p) {
  HttpRequestParser* c = self(p);
  c->keep_alive_ = llhttp_should_keep_alive(p) != 0;
  c->in_request_ = false;
  // Stop after each request: the next pipelined one waits until this one is
  // answered.
  return HPE_PAUSED;
}

HttpRequestParser::Outcome HttpRequestParser::feed(std::string_view data, size_t* consumed) {
  *consumed = 0;
  if (error_status_ != 0) return Outcome::kError;
  if (data.empty()) return Outcome::kNeedMore;
  const llhttp_errno_t err = llhttp_execute(&parser_, data.data(), data.size());
  if (err == HPE_OK) {
    *consumed = data.size();
    return Outcome::kNeedMore;
  }
  if (err == HPE_PAUSED) {
    *consumed = static_cast<size_t>(llhttp_get_error_pos(&parser_) - data.data());
    llhttp_resume(&parser_);
    return Outcome::kRequest;
  }
  if (refused_head_) {
    error_status_ = 400;  // later calls: the connection is done
    error_message_ = "the request was refused from its head";
    in_request_ = false;
    return Outcome::kRefused;
  }
  if (refuse_status_ != 0) {
    error_status_ = refuse_status_;
    error_message_ = refuse_message_;
  } else if (err == HPE_PAUSED_H2_UPGRADE) {
    error_status_ = 505;
    error_message_ = "HTTP/2 is not supported: use HTTP/1.1";
  } else if (err == HPE_PAUSED_UPGRADE) {
    error_status_ = 400;  // on_headers_complete clears upgrades; kept for safety
    error_message_ = "protocol upgrades are not supported";
  } else {
    error_status_ = 400;
    error_message_ = std::string("malformed HTTP request: ") + llhttp_errno_name(err);
  }
  in_request_ = false;
  return Outcome::kError;
}

HttpRequest HttpRequestParser::take_request() {
  HttpRequest out = std::move(request_);
  request_ = HttpRequest();
  return out;
}

}  // namespace larder
