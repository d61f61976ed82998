#include <array>
#include <string>
#include <vector>

#include "engine/tokenizer/answer_memo.h"
#include "storage/page_record.h"
#include "tests/fuzz/harness.h"

namespace larder::fuzz {

// What the harness expects a record to be: the seed corpus
// (tests/fuzz/corpus/disk_record/) holds records encoded with exactly these.
PageRecordMeta fuzz_record_meta() {
  PageRecordMeta meta;
  for (int i = 0; i < 16; ++i) meta.fingerprint[size_t(i)] = uint8_t(i);
  meta.kv_dtype = 0;
  meta.n_layers = 2;
  meta.page_size = 4;
  meta.kv_dim = 2;
  return meta;
}

int disk_record(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view record(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) {
    if (auto ids = decode_answer_record(record, "Once upon a time", 512)) {
      LARDER_FUZZ_ASSERT(!ids->empty());
      for (int32_t id : *ids) LARDER_FUZZ_ASSERT(id >= 0 && id < 512);
      LARDER_FUZZ_ASSERT(encode_answer_record("Once upon a time", *ids) == record);
    }
    return 0;
  }
  const PageRecordMeta meta = fuzz_record_meta();
  const PageKey key{0x0123456789abcdefull, 0xfedcba9876543210ull};
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  // K and V, n_layers x page_size x kv_dim floats each.
  std::vector<uint8_t> payload(2 * 2 * 4 * 2 * sizeof(float), 0xAA);
  const Status st = decode_page_record(record, key, meta, tokens, payload);
  if (st.is_ok()) {
    // Only the canonical encoding of what was expected passes every check.
    LARDER_FUZZ_ASSERT(encode_page_record(key, meta, tokens, payload) == record);
  } else {
    // A rejected record leaves the caller's page untouched.
    for (uint8_t b : payload) LARDER_FUZZ_ASSERT(b == 0xAA);
  }
  return 0;
}

}  // namespace larder::fuzz
