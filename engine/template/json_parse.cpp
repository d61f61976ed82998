#include "engine/template/json_parse.h"

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace larder {

namespace {

using J = nlohmann::ordered_json;

// Past this many keys an object under construction gets a hash index of
// its keys; below it a scan is as cheap.
constexpr size_t kIndexFrom = 8;

// nlohmann SAX handler building the document (json_sax_dom_parser's
// behaviour, with a hash index per open object).
class Builder {
 public:
  explicit Builder(JsonParseCounters* counters) : counters_(counters) {}

  bool null() { return put(J(nullptr)); }
  bool boolean(bool v) { return put(J(v)); }
  bool number_integer(J::number_integer_t v) { return put(J(v)); }
  bool number_unsigned(J::number_unsigned_t v) { return put(J(v)); }
  bool number_float(J::number_float_t v, const J::string_t&) { return put(J(v)); }
  bool string(J::string_t& v) { return put(J(std::move(v))); }
  bool binary(J::binary_t& v) { return put(J::binary(std::move(v))); }

  bool start_object(std::size_t) {
    frames_.push_back({place(J(J::value_t::object)), {}});
    return true;
  }
  bool key(J::string_t& k) {
    Frame& f = frames_.back();
    // ordered_map is a vector of (key, value); its operator[] takes a key.
    J::object_t::Container& obj = f.value->get_ref<J::object_t&>();
    if (f.index.empty()) {
      for (auto& item : obj) {
        ++compares_;
        if (item.first == k) {
          pending_ = &item.second;
          return true;
        }
      }
    } else {
      ++compares_;
      if (const auto it = f.index.find(k); it != f.index.end()) {
        pending_ = &obj[it->second].second;
        return true;
      }
    }
    obj.emplace_back(k, J());
    if (obj.size() > kIndexFrom) {
      if (f.index.empty()) {
        for (size_t i = 0; i < obj.size(); ++i) f.index.emplace(obj[i].first, i);
      } else {
        f.index.emplace(std::move(k), obj.size() - 1);
      }
    }
    pending_ = &obj.back().second;
    return true;
  }
  bool end_object() {
    frames_.pop_back();
    return true;
  }
  bool start_array(std::size_t) {
    frames_.push_back({place(J(J::value_t::array)), {}});
    return true;
  }
  bool end_array() {
    frames_.pop_back();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    failed_ = true;
    return false;
  }

  bool failed() const { return failed_; }
  J take() { return std::move(root_); }
  size_t compares() const { return compares_; }

 private:
  struct Frame {
    J* value;  // an object or array still open; its parent does not grow meanwhile
    std::unordered_map<std::string, size_t> index;  // key -> position (objects past kIndexFrom keys)
  };

  // Stores v where the next value goes (the root, the back of the open
  // array, or the open object's last key) and returns where it is.
  J* place(J v) {
    if (frames_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    J& top = *frames_.back().value;
    if (top.is_array()) {
      J::array_t& a = top.get_ref<J::array_t&>();
      a.push_back(std::move(v));
      return &a.back();
    }
    *pending_ = std::move(v);
    return pending_;
  }
  bool put(J v) {
    place(std::move(v));
    return true;
  }

  JsonParseCounters* counters_;
  J root_;
  std::vector<Frame> frames_;
  J* pending_ = nullptr;  // the value slot of the open object's last key
  bool failed_ = false;
  size_t compares_ = 0;

 public:
  ~Builder() {
    if (counters_ != nullptr) counters_->key_compares += compares_;
  }
};

}  // namespace

J parse_json_ordered(std::string_view text, JsonParseCounters* counters) {
  Builder b(counters);
  const bool ok = J::sax_parse(text.begin(), text.end(), &b, J::input_format_t::json, /*strict=*/true);
  if (!ok || b.failed()) return J(J::value_t::discarded);
  return b.take();
}

}  // namespace larder
