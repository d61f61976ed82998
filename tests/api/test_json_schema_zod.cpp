// What zod 3 and zod 4 schemas become through the openai SDK's
// zodResponseFormat (6.49; printed from the SDK and pasted here): ranges
// from .int() / .min() / .positive(), zod 3's "nullable": true, zod 4's
// pattern beside a format, and the bounds and patterns of tool parameters.
// Documents picked by hand, valid or not by zod's own rules.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "api/json_schema_grammar.h"
#include "tests/api/schema_test_util.h"

using namespace larder;
using namespace larder::testing;
using json = nlohmann::ordered_json;

namespace {

// z.object({ age: z.number().int().min(0).max(150), count: z.number().int(),
//   score: z.number().positive(), ratio: z.number().min(0).max(1),
//   nick: z.string().nullable(), id: z.string().uuid(), email: z.string().email(),
//   at: z.string().datetime(), tags: z.array(z.string()).max(3) })
const char* kZod3 = R"({"type":"object","properties":{
  "age":{"type":"integer","minimum":0,"maximum":150},"count":{"type":"integer"},
  "score":{"type":"number","exclusiveMinimum":0},"ratio":{"type":"number","minimum":0,"maximum":1},
  "nick":{"type":"string","nullable":true},"id":{"type":"string","format":"uuid"},
  "email":{"type":"string","format":"email"},"at":{"type":"string","format":"date-time"},
  "tags":{"type":"array","items":{"type":"string"},"maxItems":3}},
  "required":["age","count","score","ratio","nick","id","email","at","tags"],"additionalProperties":false,
  "$schema":"http://json-schema.org/draft-07/schema#"})";

// The same object in zod 4 (zod/v4; z.uuid(), z.email(), z.iso.datetime()).
const char* kZod4 = R"({"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{
  "age":{"type":"integer","minimum":0,"maximum":150},
  "count":{"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991},
  "score":{"type":"number","exclusiveMinimum":0},"ratio":{"type":"number","minimum":0,"maximum":1},
  "nick":{"anyOf":[{"type":"string"},{"type":"null"}]},
  "id":{"type":"string","format":"uuid","pattern":"^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000)$"},
  "email":{"type":"string","format":"email","pattern":"^(?!\\.)(?!.*\\.\\.)([A-Za-z0-9_'+\\-\\.]*)[A-Za-z0-9_+-]@([A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$"},
  "at":{"type":"string","format":"date-time","pattern":"^(?:(?:\\d\\d[2468][048]|\\d\\d[13579][26]|\\d\\d0[48]|[02468][048]00|[13579][26]00)-02-29|\\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|(?:02)-(?:0[1-9]|1\\d|2[0-8])))T(?:(?:[01]\\d|2[0-3]):[0-5]\\d(?::[0-5]\\d(?:\\.\\d+)?)?(?:Z))$"},
  "tags":{"maxItems":3,"type":"array","items":{"type":"string"}}},
  "required":["age","count","score","ratio","nick","id","email","at","tags"],"additionalProperties":false})";

std::string doc(const std::string& age, const std::string& count, const std::string& score, const std::string& ratio,
                const std::string& nick, const std::string& id, const std::string& email, const std::string& at,
                const std::string& tags) {
  std::string out = "{\"age\":";
  out.append(age).append(",\"count\":").append(count).append(",\"score\":").append(score);
  out.append(",\"ratio\":").append(ratio).append(",\"nick\":").append(nick).append(",\"id\":\"").append(id);
  out.append("\",\"email\":\"").append(email).append("\",\"at\":\"").append(at).append("\",\"tags\":").append(tags);
  return out + "}";
}

const std::string kId = "123e4567-e89b-12d3-a456-426614174000";
const std::string kAt = "2026-12-02T10:30:00Z";

}  // namespace

TEST_CASE("zod schemas: what both zod 3 and zod 4 accept is written, what they refuse is not", "[api][schema][zod]") {
  for (const char* schema : {kZod3, kZod4}) {
    auto g = from_schema(schema);
    CHECK(accepts(*g, doc("0", "0", "0.5", "0", "null", kId, "a@b.co", kAt, "[]")));
    CHECK(accepts(*g, doc("150", "-42", "3", "1", "\"Tom\"", kId, "tom.o+x@mail.example.org", kAt, "[\"a\",\"b\",\"c\"]")));
    CHECK(accepts(*g, doc("37", "9007199254740991", "1e-0", "0.25", "\"\"", kId, "x_y@d-1.io", "2024-02-29T23:59:59.5Z", "[]")) ==
          false);  // no exponent under a bound: 1e-0 is outside what the grammar writes
    CHECK(accepts(*g, doc("37", "9007199254740991", "0.001", "0.25", "\"\"", kId, "x_y@d-1.io", "2024-02-29T23:59:59.5Z", "[]")));
    CHECK(accepts(*g, doc("37", "-9007199254740991", "12", "0.999", "\"x\"", kId, "a@b.co", kAt, "[]")));
    // Each field out of its range, one at a time.
    CHECK_FALSE(accepts(*g, doc("151", "0", "1", "0", "null", kId, "a@b.co", kAt, "[]")));
    CHECK_FALSE(accepts(*g, doc("-1", "0", "1", "0", "null", kId, "a@b.co", kAt, "[]")));
    CHECK_FALSE(accepts(*g, doc("1.5", "0", "1", "0", "null", kId, "a@b.co", kAt, "[]")));
    CHECK_FALSE(accepts(*g, doc("1", "0", "0", "0", "null", kId, "a@b.co", kAt, "[]")));     // score > 0
    CHECK_FALSE(accepts(*g, doc("1", "0", "0.0", "0", "null", kId, "a@b.co", kAt, "[]")));
    CHECK_FALSE(accepts(*g, doc("1", "0", "-0.5", "0", "null", kId, "a@b.co", kAt, "[]")));
    CHECK_FALSE(accepts(*g, doc("1", "0", "1", "1.01", "null", kId, "a@b.co", kAt, "[]")));  // ratio <= 1
    CHECK_FALSE(accepts(*g, doc("1", "0", "1", "-0.1", "null", kId, "a@b.co", kAt, "[]")));
    CHECK_FALSE(accepts(*g, doc("1", "0", "1", "0", "3", kId, "a@b.co", kAt, "[]")));         // nick: string or null
    CHECK_FALSE(accepts(*g, doc("1", "0", "1", "0", "null", "123e4567", "a@b.co", kAt, "[]")));
    CHECK_FALSE(accepts(*g, doc("1", "0", "1", "0", "null", kId, "a..b@c.de", kAt, "[]")));
    CHECK_FALSE(accepts(*g, doc("1", "0", "1", "0", "null", kId, ".a@c.de", kAt, "[]")));
    CHECK_FALSE(accepts(*g, doc("1", "0", "1", "0", "null", kId, "a@c.d", kAt, "[]")));
    CHECK_FALSE(accepts(*g, doc("1", "0", "1", "0", "null", kId, "a@b.co", "2026-12-02", "[]")));
    CHECK_FALSE(accepts(*g, doc("1", "0", "1", "0", "null", kId, "a@b.co", kAt, "[\"a\",\"b\",\"c\",\"d\"]")));
  }
  auto z4 = from_schema(kZod4);
  // zod 4's own patterns narrow further: the safe-integer range, a uuid's
  // version and variant digits, February 29 only in leap years, a time
  // zone of Z.
  CHECK_FALSE(accepts(*z4, doc("1", "9007199254740992", "1", "0", "null", kId, "a@b.co", kAt, "[]")));
  CHECK_FALSE(accepts(*z4, doc("1", "0", "1", "0", "null", "123e4567-e89b-02d3-a456-426614174000", "a@b.co", kAt, "[]")));
  CHECK_FALSE(accepts(*z4, doc("1", "0", "1", "0", "null", kId, "a@b.co", "2023-02-29T10:00:00Z", "[]")));
  CHECK_FALSE(accepts(*z4, doc("1", "0", "1", "0", "null", kId, "a@b.co", "2026-12-02T10:30:00+01:00", "[]")));
  auto z3 = from_schema(kZod3);
  CHECK(accepts(*z3, doc("1", "9007199254740992", "1", "0", "null", kId, "a@b.co", "2024-02-29T10:00:00.5Z", "[]")));
  CHECK_FALSE(accepts(*z3, doc("1", "0", "1", "0", "null", kId, "a@b.co", "2023-02-29T10:00:00Z", "[]")));  // leap years only
}

TEST_CASE("zod schemas: bounds in their draft 4, draft 6 and type-less forms", "[api][schema][zod]") {
  auto d4 = from_schema(R"({"type":"integer","minimum":1,"exclusiveMinimum":true,"maximum":5,"exclusiveMaximum":false})");
  CHECK_FALSE(accepts(*d4, "1"));
  CHECK(accepts(*d4, "2"));
  CHECK(accepts(*d4, "5"));
  CHECK_FALSE(accepts(*d4, "6"));
  // Both forms: the tighter wins (minimum 3 over exclusiveMinimum 1).
  auto both = from_schema(R"({"type":"integer","minimum":3,"exclusiveMinimum":1,"exclusiveMaximum":10.5})");
  CHECK_FALSE(accepts(*both, "2"));
  CHECK(accepts(*both, "3"));
  CHECK(accepts(*both, "10"));
  CHECK_FALSE(accepts(*both, "11"));
  // An integer's fractional bounds round inward: 0.5 < n < 2.5 is 1 and 2.
  auto frac = from_schema(R"({"type":"integer","exclusiveMinimum":0.5,"maximum":2.5})");
  CHECK_FALSE(accepts(*frac, "0"));
  CHECK(accepts(*frac, "1"));
  CHECK(accepts(*frac, "2"));
  CHECK_FALSE(accepts(*frac, "3"));
  auto typeless = from_schema(R"({"type":"object","properties":{"n":{"minimum":-2,"maximum":-1},
      "s":{"pattern":"^[ab]{2}$"}},"required":["n","s"]})");
  CHECK(accepts(*typeless, R"({"n":-1.5,"s":"ab"})"));
  CHECK_FALSE(accepts(*typeless, R"({"n":-0.5,"s":"ab"})"));
  CHECK_FALSE(accepts(*typeless, R"({"n":-1,"s":"abc"})"));
  // Bounds past the whole parts a bounded number has (2^53 - 1): no constraint on that side.
  auto wide = from_schema(R"({"type":"number","minimum":-1e300,"maximum":2})");
  CHECK(accepts(*wide, "-9007199254740990.5"));
  CHECK_FALSE(accepts(*wide, "-9007199254740992"));  // past 2^53 - 1 a double skips integers
  // Exclusive bounds past 2^53: 9007199254740993 would parse as ...992, on the bound.
  CHECK_THAT(refusal(R"({"type":"integer","exclusiveMinimum":9007199254740992,"exclusiveMaximum":9007199254740994})"),
             Catch::Contains("leave no integer"));
  CHECK_FALSE(accepts(*wide, "2.5"));
  auto nullable_int = from_schema(R"({"type":"integer","minimum":0,"nullable":true})");
  CHECK(accepts(*nullable_int, "null"));
  CHECK(accepts(*nullable_int, "7"));
  CHECK_FALSE(accepts(*nullable_int, "-7"));
  auto not_nullable = from_schema(R"({"type":"string","nullable":false})");
  CHECK_FALSE(accepts(*not_nullable, "null"));
}

TEST_CASE("zod schemas: a pattern with lengths, an escaped quote, a format alone", "[api][schema][zod]") {
  auto code = from_schema(R"({"type":"string","pattern":"^[A-Z]{2}-\\d+$","minLength":4,"maxLength":5})");
  CHECK(accepts(*code, R"("AB-1")"));
  CHECK(accepts(*code, R"("AB-12")"));
  CHECK_FALSE(accepts(*code, R"("AB-123")"));  // maxLength
  CHECK_FALSE(accepts(*code, R"("AB-")"));
  CHECK_FALSE(accepts(*code, R"("ab-1")"));
  auto quoted = from_schema(R"({"type":"string","pattern":"^say \"(hi|bye)\"\\\\?$"})");
  CHECK(accepts(*quoted, R"("say \"hi\"")"));
  CHECK(accepts(*quoted, R"("say \"bye\"\\")"));
  CHECK_FALSE(accepts(*quoted, R"("say "hi"")"));
  auto contains = from_schema(R"({"type":"string","pattern":"cat"})");  // unanchored: anywhere in the string
  CHECK(accepts(*contains, R"("a cat sat")"));
  CHECK(accepts(*contains, R"("cat")"));
  CHECK_FALSE(accepts(*contains, R"("a dog")"));
  auto email = from_schema(R"({"type":"string","format":"email"})");
  CHECK(accepts(*email, R"("first.last+tag@sub.example.com")"));
  CHECK_FALSE(accepts(*email, R"("first..last@example.com")"));
  CHECK_FALSE(accepts(*email, R"("me@-example.com")"));
  CHECK_FALSE(accepts(*email, R"("me@example")"));
  // Bounded: a local part of 64 characters at most, a host of 64.
  const std::string local64(64, 'a'), host = "b.co";
  CHECK(accepts(*email, "\"" + local64 + "@" + host + "\""));
  CHECK_FALSE(accepts(*email, "\"" + local64 + "a@" + host + "\""));
  std::string host64 = std::string(59, 'h');
  host64.append(".abcd");  // 64 characters
  CHECK(accepts(*email, "\"x@" + host64 + "\""));
  CHECK_FALSE(accepts(*email, "\"x@h" + host64 + "\""));
}

TEST_CASE("zod schemas: many patterns cost one automaton each, and their work is bounded", "[api][schema][zod]") {
  // 5000 properties with zod 4's e-mail pattern: one automaton, reused.
  json props = json::object();
  const json email = json::parse(kZod4)["properties"]["email"];
  for (int i = 0; i < 5000; ++i) props[std::string("e").append(std::to_string(i))] = email;
  json schema = {{"type", "object"}, {"properties", props}};
  Result<std::string> many = json_schema_to_gbnf(schema);
  REQUIRE(many.is_ok());
  CHECK(many->size() < (size_t(4) << 20));
  // Distinct costly patterns: refused once the schema's budget is spent.
  json heavy = json::object();
  for (int i = 0; i < 400; ++i) {
    std::string pattern = "^[a-z]{0,1000}[0-9]{0,1000}";
    pattern.append(std::to_string(i)).append("$");
    heavy[std::string("p").append(std::to_string(i))] = {{"type", "string"}, {"pattern", pattern}};
  }
  Result<std::string> refused = json_schema_to_gbnf(json{{"type", "object"}, {"properties", heavy}});
  REQUIRE_FALSE(refused.is_ok());
  CHECK_THAT(refused.status().message(), Catch::Contains("too complex"));
}
