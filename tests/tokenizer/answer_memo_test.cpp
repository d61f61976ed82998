// AnswerMemo (bounded LRU of answer ids) and the answer records of the disk
// tier.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "engine/tokenizer/answer_memo.h"

namespace larder {

TEST_CASE("AnswerMemo keeps ids by exact text, drops least recently used beyond its bound", "[answer_memo]") {
  AnswerMemo memo(10);
  memo.remember("alpha", std::vector<int32_t>{1, 2, 3});
  memo.remember("beta", std::vector<int32_t>{4, 5, 6, 7});
  CHECK(memo.n_answers() == 2);
  CHECK(memo.n_tokens() == 7);
  CHECK(memo.find("alpha") == std::vector<int32_t>{1, 2, 3});
  CHECK_FALSE(memo.find("alpha "));  // exact text only
  CHECK_FALSE(memo.find(""));
  // "alpha" was used last: adding 4 ids (11 > 10) drops "beta".
  memo.remember("gamma", std::vector<int32_t>{8, 9, 10, 11});
  CHECK_FALSE(memo.find("beta"));
  CHECK(memo.find("alpha") == std::vector<int32_t>{1, 2, 3});
  CHECK(memo.find("gamma") == std::vector<int32_t>{8, 9, 10, 11});
  CHECK(memo.n_tokens() == 7);
  // Same text again replaces the entry; empty or over-long answers are not kept.
  memo.remember("alpha", std::vector<int32_t>{12});
  CHECK(memo.find("alpha") == std::vector<int32_t>{12});
  CHECK(memo.n_tokens() == 5);
  memo.remember("", std::vector<int32_t>{1});
  memo.remember("x", std::vector<int32_t>{});
  memo.remember("long", std::vector<int32_t>(11, 1));
  CHECK(memo.n_answers() == 2);
  CHECK_FALSE(memo.find("long"));
}

}  // namespace larder

namespace larder {

TEST_CASE("answer records: round trip, and every damaged or foreign record is refused", "[answer_memo]") {
  const std::string text = "Hello there!";
  const std::vector<int32_t> ids = {7, 300, 12, 511};
  const std::string rec = encode_answer_record(text, ids);
  // Layout by hand: 28-byte header, 4 bytes per id, 8-byte checksum.
  REQUIRE(rec.size() == 28 + 4 * 4 + 8);
  CHECK(rec.substr(0, 4) == "LDAN");
  CHECK(uint8_t(rec[28 + 4]) == 300 % 256);
  CHECK(uint8_t(rec[28 + 5]) == 300 / 256);
  CHECK(decode_answer_record(rec, text, 512) == ids);

  CHECK_FALSE(decode_answer_record(rec, "Hello there?", 512));  // another text
  CHECK_FALSE(decode_answer_record(rec, text, 511));            // id 511 out of a 511-token vocab
  for (size_t cut = 0; cut < rec.size(); ++cut) CHECK_FALSE(decode_answer_record(rec.substr(0, cut), text, 512));
  for (size_t i = 0; i < rec.size(); ++i) {
    std::string bad = rec;
    bad[i] = char(bad[i] ^ 0x01);
    CHECK_FALSE(decode_answer_record(bad, text, 512));
  }
  CHECK_FALSE(decode_answer_record(rec + "x", text, 512));

  // Keys differ by text and by cache root; the same inputs give the same key.
  const PageKey root{1, 2}, other_root{1, 3};
  CHECK(answer_key(root, text) == answer_key(root, text));
  CHECK_FALSE(answer_key(root, text) == answer_key(root, "Hello there"));
  CHECK_FALSE(answer_key(root, text) == answer_key(other_root, text));
}

TEST_CASE("AnswerMemo scopes: an answer remembered for one tenant is not found for another", "[answer_memo]") {
  AnswerMemo memo(100);
  const std::vector<int32_t> ids = {5, 6, 7};
  memo.remember("Hello", ids, "tenant-a");
  CHECK(memo.find("Hello", "tenant-a") == ids);
  CHECK(!memo.find("Hello", "tenant-b"));
  CHECK(!memo.find("Hello"));
  memo.remember("Hello", std::vector<int32_t>{9});
  CHECK(memo.find("Hello") == std::vector<int32_t>{9});
  CHECK(memo.find("Hello", "tenant-a") == ids);
  // The scope and the text do not run into each other.
  CHECK(!memo.find("loHello", "tenant-a"));
  CHECK(!memo.find("Hello", "tenant-"));
}

}  // namespace larder
