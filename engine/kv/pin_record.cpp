#include "engine/kv/pin_record.h"

#include <cstring>

#include <xxhash.h>

namespace larder {
namespace {

constexpr std::string_view kMagic = "LRDPINS1";
constexpr size_t kKeyBytes = 16;

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(char((v >> (8 * i)) & 0xFF));
}

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(char((v >> (8 * i)) & 0xFF));
}

void put_key(std::string& out, const PageKey& k) {
  put_u64(out, k.hi);
  put_u64(out, k.lo);
}

// Reads little-endian integers off the front of a byte range; false once
// the range is too short.
struct Reader {
  std::string_view rest;
  bool u32(uint32_t* v) {
    if (rest.size() < 4) return false;
    *v = 0;
    for (int i = 0; i < 4; ++i) *v |= uint32_t(uint8_t(rest[size_t(i)])) << (8 * i);
    rest.remove_prefix(4);
    return true;
  }
  bool u64(uint64_t* v) {
    if (rest.size() < 8) return false;
    *v = 0;
    for (int i = 0; i < 8; ++i) *v |= uint64_t(uint8_t(rest[size_t(i)])) << (8 * i);
    rest.remove_prefix(8);
    return true;
  }
  bool key(PageKey* k) { return u64(&k->hi) && u64(&k->lo); }
};

}  // namespace

PageKey pin_record_key(const PageKey& engine_root) {
  std::string buf = "larder-pins-v1";
  put_key(buf, engine_root);
  XXH128_hash_t h = XXH3_128bits(buf.data(), buf.size());
  return PageKey{h.high64, h.low64};
}

std::string encode_pin_record(const std::vector<PinnedPrefix>& pins) {
  std::string out(kMagic);
  put_u32(out, uint32_t(pins.size()));
  for (const PinnedPrefix& p : pins) {
    put_key(out, p.root);
    put_u32(out, uint32_t(p.keys.size()));
    for (const PageKey& k : p.keys) put_key(out, k);
  }
  put_u64(out, XXH3_64bits(out.data(), out.size()));
  return out;
}

Result<std::vector<PinnedPrefix>> decode_pin_record(std::string_view record) {
  if (record.size() < kMagic.size() + 4 + 8 || record.substr(0, kMagic.size()) != kMagic) {
    return Status::corruption("pin record: no \"LRDPINS1\" header");
  }
  const std::string_view body = record.substr(0, record.size() - 8);
  Reader tail{record.substr(record.size() - 8)};
  uint64_t sum = 0;
  (void)tail.u64(&sum);
  if (sum != XXH3_64bits(body.data(), body.size())) return Status::corruption("pin record: checksum mismatch");
  Reader r{body.substr(kMagic.size())};
  uint32_t n_pins = 0;
  if (!r.u32(&n_pins)) return Status::corruption("pin record: truncated");
  std::vector<PinnedPrefix> pins;
  for (uint32_t i = 0; i < n_pins; ++i) {
    PinnedPrefix p;
    uint32_t n_keys = 0;
    if (!r.key(&p.root) || !r.u32(&n_keys)) return Status::corruption("pin record: truncated");
    // Checked before reserving: a bad count must not allocate gigabytes.
    if (n_keys == 0 || r.rest.size() < size_t(n_keys) * kKeyBytes) {
      return Status::corruption("pin record: pin " + std::to_string(i) + " has " + std::to_string(n_keys) +
                                " keys, more than the record holds (or none)");
    }
    p.keys.resize(n_keys);
    for (PageKey& k : p.keys) (void)r.key(&k);
    pins.push_back(std::move(p));
  }
  if (!r.rest.empty()) return Status::corruption("pin record: " + std::to_string(r.rest.size()) + " bytes too many");
  return pins;
}

PinsAtOpen stored_pin_keys(const PageKey& engine_root) {
  return [record_key = pin_record_key(engine_root)](const RecordReader& read) {
    std::vector<PageKey> keys;
    std::optional<std::string> record = read(record_key);
    if (!record) return keys;
    Result<std::vector<PinnedPrefix>> pins = decode_pin_record(*record);
    if (!pins.is_ok()) return keys;
    keys.push_back(record_key);
    for (const PinnedPrefix& p : *pins) keys.insert(keys.end(), p.keys.begin(), p.keys.end());
    return keys;
  };
}

}  // namespace larder
