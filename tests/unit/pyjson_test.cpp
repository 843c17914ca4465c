// pyjson must read what CPython's json.loads reads and write what json.dumps writes, byte for
// byte: registry file names and folder names are hashes of this text. Expected strings below were
// produced by CPython 3.11.
#include "neuron_cache/format/pyjson.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "neuron_cache/error.h"

namespace neuron_cache::pyjson {
namespace {

// The message of the input Error that parsing `text` throws, or a failure if it does not throw.
std::string parse_error(std::string_view text) {
  try {
    parse(text);
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::Input);
    return error.what();
  }
  ADD_FAILURE() << "parse accepted " << testing::PrintToString(std::string(text.substr(0, 80)));
  return "";
}

std::string nested_arrays(int depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

// ---------------------------------------------------------------------------------------------
// Parser

TEST(PyjsonParse, NonFiniteLiterals) {
  Json value = parse("[NaN, Infinity, -Infinity]");
  ASSERT_EQ(value.size(), 3u);
  EXPECT_TRUE(std::isnan(value[0].get<double>()));
  EXPECT_EQ(value[1].get<double>(), std::numeric_limits<double>::infinity());
  EXPECT_EQ(value[2].get<double>(), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(dumps(value), "[NaN, Infinity, -Infinity]");
}

TEST(PyjsonParse, NonFiniteLiteralsAreCaseSensitive) {
  parse_error("nan");
  parse_error("infinity");
  parse_error("-NaN");
  parse_error("+Infinity");
}

TEST(PyjsonParse, Literals) {
  EXPECT_EQ(parse("true"), Json(true));
  EXPECT_EQ(parse("false"), Json(false));
  EXPECT_TRUE(parse("null").is_null());
  parse_error("True");
  parse_error("nul");
  parse_error("None");
}

TEST(PyjsonParse, DuplicateKeysLastWins) {
  Json value = parse(R"({"a": 1, "b": 2, "a": 3})");
  EXPECT_EQ(value.size(), 2u);
  EXPECT_EQ(value["a"], 3);
  EXPECT_EQ(dumps(value), R"({"a": 3, "b": 2})");
}

TEST(PyjsonParse, DuplicateKeysInNestedObjects) {
  Json value = parse(R"({"x": {"k": [1], "k": {"z": null}}, "x2": 0})");
  EXPECT_EQ(dumps(value), R"({"x": {"k": {"z": null}}, "x2": 0})");
}

TEST(PyjsonParse, Whitespace) {
  EXPECT_EQ(parse(" \t\r\n[ 1 ,\n2 ]\r\n "), Json({1, 2}));
  // Python's json only skips these four characters.
  parse_error("\f1");
  parse_error("\v1");
  parse_error("1\xC2\xA0");
}

TEST(PyjsonParse, SimpleEscapes) {
  EXPECT_EQ(parse(R"("\"\\\/\b\f\n\r\t")"), Json("\"\\/\b\f\n\r\t"));
}

TEST(PyjsonParse, UnicodeEscapesAcceptBothHexCases) {
  EXPECT_EQ(parse(R"("\u00e9\u00E9\u4E2d")"), Json("\xC3\xA9\xC3\xA9\xE4\xB8\xAD"));
  EXPECT_EQ(parse(R"("\u0000")").get<std::string>(), std::string(1, '\0'));
}

TEST(PyjsonParse, SurrogatePairEscapesAreJoined) {
  EXPECT_EQ(parse(R"("\ud83d\ude80")"), Json("\xF0\x9F\x9A\x80"));  // U+1F680
  EXPECT_EQ(parse(R"("\uDBFF\uDFFF")"), Json("\xF4\x8F\xBF\xBF"));  // U+10FFFF
  EXPECT_EQ(parse(R"("\ud800\udc00")"), Json("\xF0\x90\x80\x80"));  // U+10000
}

TEST(PyjsonParse, LoneSurrogatesAreKeptAsWtf8) {
  EXPECT_EQ(parse(R"("\ud83d")"), Json("\xED\xA0\xBD"));
  EXPECT_EQ(parse(R"("\ude80x")"), Json("\xED\xBA\x80x"));
  // A high surrogate followed by a non-surrogate escape stays alone; the next escape is kept.
  EXPECT_EQ(parse(R"("\ud83d\u0041")"), Json("\xED\xA0\xBD"
                                             "A"));
  // Two high surrogates: the second pairs with the low one, as in Python.
  EXPECT_EQ(parse(R"("\ud83d\ud83d\ude80")"), Json("\xED\xA0\xBD\xF0\x9F\x9A\x80"));
  // Low then high is not a pair.
  EXPECT_EQ(parse(R"("\ude80\ud83d")"), Json("\xED\xBA\x80\xED\xA0\xBD"));
}

TEST(PyjsonParse, LoneSurrogatesSerializeBackToTheirEscapes) {
  for (const char* text : {R"("\ud83d")", R"("\udfff")", R"("a\ud800b")", R"("\ude80\ud83d")"}) {
    EXPECT_EQ(dumps(parse(text)), text);
  }
  EXPECT_EQ(dumps(parse(R"("\ud83d\u0041")")), R"("\ud83dA")");
}

TEST(PyjsonParse, LoneSurrogateKeysSortByCodePoint) {
  // U+D7FF < U+D800 (lone) < U+E000 < U+10000, as Python sorts str keys.
  Json value = parse(R"({"\ud800\udc00": 0, "\ue000": 1, "\ud800": 2, "\ud7ff": 3})");
  EXPECT_EQ(dumps(value), R"({"\ud7ff": 3, "\ud800": 2, "\ue000": 1, "\ud800\udc00": 0})");
}

TEST(PyjsonParse, RawUtf8IsAccepted) {
  Json value = parse("\"\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x9A\x80\xEF\xBF\xBF\x7F\"");
  EXPECT_EQ(dumps(value), R"("\u00e9\u4e2d\ud83d\ude80\uffff\u007f")");
}

TEST(PyjsonParse, InvalidUtf8IsRejected) {
  const char* const kInvalid[] = {
      "\"\xC3\"",              // truncated 2-byte sequence
      "\"\xE4\xB8\"",          // truncated 3-byte sequence
      "\"\xC0\xAF\"",          // overlong '/'
      "\"\xE0\x80\xAF\"",      // overlong, 3 bytes
      "\"\xED\xA0\x80\"",      // encoded surrogate: not UTF-8 (Python's strict decoder refuses it)
      "\"\xF4\x90\x80\x80\"",  // above U+10FFFF
      "\"\xFF\"",              // never valid
      "\"\x80\"",              // continuation byte alone
      "\"\xC3\x28\"",          // lead byte followed by ASCII
  };
  for (const char* text : kInvalid) {
    EXPECT_NE(parse_error(text).find("UTF-8"), std::string::npos) << text;
  }
}

TEST(PyjsonParse, ByteOrderMarkIsRejected) {
  EXPECT_NE(parse_error("\xEF\xBB\xBF{}").find("BOM"), std::string::npos);
}

TEST(PyjsonParse, ControlCharactersInStringsAreRejected) {
  for (char c : {'\x00', '\x01', '\t', '\n', '\r', '\x1f'}) {
    std::string text = std::string("\"a") + c + "b\"";
    EXPECT_NE(parse_error(text).find("control character"), std::string::npos) << int(c);
  }
  EXPECT_EQ(parse("\"\x7f\""), Json("\x7f"));  // DEL is not a control character for json
}

TEST(PyjsonParse, InvalidEscapesAreRejected) {
  parse_error(R"("\x41")");
  parse_error(R"("\U0041")");
  parse_error(R"("\u12")");
  parse_error(R"("\u12G4")");
  parse_error(R"("\ud83d\u12")");  // Python also checks the escape after a high surrogate
  parse_error("\"\\");
  parse_error("\"abc");
}

// A small text can still build a huge DOM: values are counted before they are built, and a text
// larger than its kind allows is refused before it is read.
TEST(PyjsonParse, ValueAndByteLimitsRefuseBeforeTheDomGrows) {
  std::string lists = "[";
  for (int i = 0; i < 2'000'000; ++i) lists += i ? ",[]" : "[]";
  lists += "]";
  ASSERT_LT(lists.size(), kApiAnswer.max_bytes);
  try {
    parse(lists, kApiAnswer);
    FAIL() << "two million values were parsed as an API answer";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("more than 1000000 values"), std::string::npos)
        << error.what();
  }
  EXPECT_EQ(parse(lists).size(), 2'000'000u);  // the default allows an index's size
  std::string big(kMemo.max_bytes + 1, ' ');
  big[0] = '1';
  EXPECT_FALSE(parse_or_nothing(big, kMemo));
  EXPECT_EQ(parse_or_nothing("[1]", kMemo), Json::array({1}));
}

TEST(PyjsonParse, DepthLimitGivesAnErrorNotACrash) {
  EXPECT_EQ(dumps(parse(nested_arrays(64))).size(), 128u);
  std::string message = parse_error(nested_arrays(65));
  EXPECT_NE(message.find("nesting deeper than 64"), std::string::npos) << message;
  EXPECT_NE(message.find("column 65"), std::string::npos) << message;  // the 65th '['
  parse_error("[" + nested_arrays(64) + "]");
  EXPECT_EQ(dumps(parse(nested_arrays(512), {1 << 20, 512, 10'000})).size(), 1024u);
  // Far beyond any stack: must still fail cleanly.
  EXPECT_NE(parse_error(std::string(1'000'000, '[')).find("nesting"), std::string::npos);
  EXPECT_NE(parse_error(std::string(100'000, '{')).find("line 1"), std::string::npos);
}

TEST(PyjsonParse, DepthCountsObjectsAndArraysAlike) {
  std::string text;
  for (int i = 0; i < 32; ++i) text += R"({"a": [)";
  for (int i = 0; i < 32; ++i) text += "]}";
  EXPECT_TRUE(parse(text).is_object());
  parse_error("[" + text + "]");
}

TEST(PyjsonParse, Int64AndUint64Bounds) {
  Json value = parse(
      "[-9223372036854775808, 9223372036854775807, 9223372036854775808, "
      "18446744073709551615]");
  EXPECT_TRUE(value[0].is_number_integer());
  EXPECT_EQ(value[0].get<int64_t>(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(value[1].get<int64_t>(), std::numeric_limits<int64_t>::max());
  EXPECT_TRUE(value[2].is_number_unsigned());
  EXPECT_EQ(value[2].get<uint64_t>(), 9223372036854775808u);
  EXPECT_EQ(value[3].get<uint64_t>(), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(dumps(value),
            "[-9223372036854775808, 9223372036854775807, 9223372036854775808, "
            "18446744073709551615]");
}

TEST(PyjsonParse, IntegersOutsideSixtyFourBitsAreErrorsWithAMessage) {
  std::string message = parse_error("[18446744073709551616]");
  EXPECT_NE(message.find("18446744073709551616"), std::string::npos) << message;
  EXPECT_NE(message.find("64-bit"), std::string::npos) << message;
  EXPECT_NE(message.find("line 1"), std::string::npos) << message;
  EXPECT_NE(parse_error("-9223372036854775809").find("64-bit"), std::string::npos);
  EXPECT_NE(parse_error("123456789012345678901234567890").find("64-bit"), std::string::npos);
}

TEST(PyjsonParse, NegativeZeroIntegerIsZero) {
  Json value = parse("-0");
  EXPECT_TRUE(value.is_number_integer());
  EXPECT_EQ(dumps(value), "0");
}

TEST(PyjsonParse, NumbersWithFractionOrExponentAreFloats) {
  EXPECT_EQ(dumps(parse("[1.0, 1e5, 1E+2, 2e-3, -0.0, 0e0, 1.5E-07]")),
            "[1.0, 100000.0, 100.0, 0.002, -0.0, 0.0, 1.5e-07]");
  EXPECT_TRUE(parse("1e2").is_number_float());
  EXPECT_TRUE(std::signbit(parse("-0.0").get<double>()));
}

TEST(PyjsonParse, FloatsOutOfRangeBehaveLikePythonFloat) {
  // float("1e400") is inf and float("1e-400") is 0.0 in Python; json.loads agrees.
  EXPECT_EQ(dumps(parse("[1e400, -1e400, 1e-400, -1e-400]")), "[Infinity, -Infinity, 0.0, -0.0]");
}

TEST(PyjsonParse, FloatsAreCorrectlyRounded) {
  EXPECT_EQ(parse("0.1").get<double>(), 0.1);
  EXPECT_EQ(parse("2.2250738585072011e-308").get<double>(), 2.2250738585072011e-308);
  EXPECT_EQ(parse("9007199254740993").get<int64_t>(), 9007199254740993);
  EXPECT_EQ(parse("9007199254740993.0").get<double>(), 9007199254740992.0);
}

TEST(PyjsonParse, MalformedNumbersAreRejected) {
  for (const char* text :
       {"01", "-01", "1.", ".5", "-", "+1", "1e", "1e+", "0x10", "1.e5", "--1"}) {
    parse_error(text);
  }
}

TEST(PyjsonParse, StructuralErrors) {
  for (const char* text : {"", "   ", "[1,]", R"({"a": 1,})", R"({'a': 1})", R"({"a" 1})",
                           R"({1: 2})", "[1 2]", "[", "{", "]", "1 2", R"({"a": })", "[,1]"}) {
    parse_error(text);
  }
}

TEST(PyjsonParse, ErrorMessagesCarryLineAndColumn) {
  // Python: "Expecting value: line 3 column 8 (char 17)".
  std::string message = parse_error("{\n  \"b\": 1,\n  \"a\": tru\n}");
  EXPECT_NE(message.find("line 3, column 8"), std::string::npos) << message;
  message = parse_error("[1,\n2,\n\n  \"x\n\"]");
  EXPECT_NE(message.find("line 4"), std::string::npos) << message;
  EXPECT_NE(parse_error("[1] x").find("line 1, column 5"), std::string::npos);
}

TEST(PyjsonParse, ErrorColumnsCountCharactersNotBytes) {
  // Python: "Expecting value: line 1 column 8 (char 7)" for {"\u00e9\u4e2d": tru}.
  std::string message = parse_error("{\"\xC3\xA9\xE4\xB8\xAD\": tru}");
  EXPECT_NE(message.find("line 1, column 8"), std::string::npos) << message;
}

TEST(PyjsonParse, ParseErrorsAreInputErrors) {
  try {
    parse("{");
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::Input);
    EXPECT_NE(std::string(error.what()).find("invalid JSON"), std::string::npos);
  }
}

// ---------------------------------------------------------------------------------------------
// Writer

TEST(PyjsonDumps, IndentTwoLayout) {
  Json value = parse(R"({"b": [1, {"d": null, "c": true}], "a": "x", "e": {}})");
  EXPECT_EQ(dumps(value, 2),
            "{\n"
            "  \"a\": \"x\",\n"
            "  \"b\": [\n"
            "    1,\n"
            "    {\n"
            "      \"c\": true,\n"
            "      \"d\": null\n"
            "    }\n"
            "  ],\n"
            "  \"e\": {}\n"
            "}");
}

TEST(PyjsonDumps, CompactSeparators) {
  Json value = parse(R"({"b": [1, {"d": null, "c": false}], "a": "x", "e": []})");
  EXPECT_EQ(dumps(value), R"({"a": "x", "b": [1, {"c": false, "d": null}], "e": []})");
}

TEST(PyjsonDumps, EmptyContainers) {
  for (std::optional<int> indent : {std::optional<int>(), std::optional<int>(2)}) {
    EXPECT_EQ(dumps(Json::object(), indent), "{}");
    EXPECT_EQ(dumps(Json::array(), indent), "[]");
  }
  Json nested = parse(R"([[], {}, [[]], {"a": {}}])");
  EXPECT_EQ(dumps(nested), R"([[], {}, [[]], {"a": {}}])");
  EXPECT_EQ(dumps(nested, 2), "[\n  [],\n  {},\n  [\n    []\n  ],\n  {\n    \"a\": {}\n  }\n]");
}

TEST(PyjsonDumps, OtherIndentWidthsMatchPython) {
  Json value = parse(R"([1, [2, {}], []])");
  // json.dumps([1, [2, {}], []], indent=0) and indent=4.
  EXPECT_EQ(dumps(value, 0), "[\n1,\n[\n2,\n{}\n],\n[]\n]");
  EXPECT_EQ(dumps(value, 4), "[\n    1,\n    [\n        2,\n        {}\n    ],\n    []\n]");
}

TEST(PyjsonDumps, Scalars) {
  EXPECT_EQ(dumps(Json(nullptr)), "null");
  EXPECT_EQ(dumps(Json(true), 2), "true");
  EXPECT_EQ(dumps(Json(-7)), "-7");
  EXPECT_EQ(dumps(Json(std::numeric_limits<uint64_t>::max())), "18446744073709551615");
  EXPECT_EQ(dumps(Json(std::numeric_limits<int64_t>::min())), "-9223372036854775808");
  EXPECT_EQ(dumps(Json(3.0)), "3.0");
  EXPECT_EQ(dumps(Json(std::nan(""))), "NaN");
  EXPECT_EQ(dumps(Json(-std::numeric_limits<double>::infinity()), 2), "-Infinity");
  EXPECT_EQ(dumps(Json("s"), 2), "\"s\"");
}

struct EscapeCase {
  std::string raw;
  std::string escaped;
};

TEST(PyjsonDumps, StringEscapes) {
  const EscapeCase kCases[] = {
      {"\"", R"("\"")"},
      {"\\", R"("\\")"},
      {"/", R"("/")"},
      {"\b\f\n\r\t", R"("\b\f\n\r\t")"},
      {std::string(1, '\0'), R"("\u0000")"},
      {"\x01\x0b\x1f", R"("\u0001\u000b\u001f")"},
      {"\x7f", R"("\u007f")"},
      {"\xC2\x80", R"("\u0080")"},
      {"\xC3\xA9", R"("\u00e9")"},
      {"\xE2\x80\xA8", R"("\u2028")"},
      {"\xEF\xBF\xBF", R"("\uffff")"},
      {"\xF0\x9F\x9A\x80", R"("\ud83d\ude80")"},
      {"\xF0\x90\x80\x80", R"("\ud800\udc00")"},
      {"\xF4\x8F\xBF\xBF", R"("\udbff\udfff")"},
      {" ~", R"(" ~")"},
      {"", R"("")"},
  };
  for (const auto& [raw, escaped] : kCases) {
    EXPECT_EQ(dumps(Json(raw)), escaped);
    EXPECT_EQ(dumps(Json(raw), 2), escaped);
    EXPECT_EQ(parse(escaped), Json(raw)) << escaped;
  }
}

TEST(PyjsonDumps, KeysAreEscapedLikeValues) {
  Json value = Json::object();
  value["a\"b"] = 1;
  value["\xC3\xA9\n"] = 2;
  value["\xF0\x9F\x98\x80"] = 3;
  EXPECT_EQ(dumps(value), R"({"a\"b": 1, "\u00e9\n": 2, "\ud83d\ude00": 3})");
}

TEST(PyjsonDumps, KeysSortByCodePointNotUtf16) {
  // UTF-16 order would put U+1F600 (a surrogate pair, 0xD83D...) before U+E000 and U+FF01.
  Json value = parse(R"({"\ud83d\ude00": 0, "\uff01": 1, "\ue000": 2, "\u00e9": 3, "z": 4})");
  EXPECT_EQ(dumps(value), R"({"z": 4, "\u00e9": 3, "\ue000": 2, "\uff01": 1, "\ud83d\ude00": 0})");
}

TEST(PyjsonDumps, KeysSortLikePythonStrings) {
  Json value = parse(R"({"a": 0, "B": 1, "_": 2, "a_b": 3, "a-b": 4, "aB": 5, "ab": 6, "a0": 7,
                         "10": 8, "9": 9, " ": 10, "": 11})");
  EXPECT_EQ(dumps(value), R"({"": 11, " ": 10, "10": 8, "9": 9, "B": 1, "_": 2, "a": 0, )"
                          R"("a-b": 4, "a0": 7, "aB": 5, "a_b": 3, "ab": 6})");
}

TEST(PyjsonDumps, InvalidUtf8IsAnError) {
  EXPECT_THROW(dumps(Json("\xFF")), Error);
  EXPECT_THROW(dumps(Json("\xC3")), Error);
  Json value = Json::object();
  value["\xC0\xAF"] = 1;
  EXPECT_THROW(dumps(value, 2), Error);
}

// ---------------------------------------------------------------------------------------------
// float_repr

struct ReprCase {
  double value;
  const char* repr;
};

// repr() of each value in CPython 3.11.
constexpr ReprCase kReprCases[] = {
    {0.0, "0.0"},
    {-0.0, "-0.0"},
    {1e-05, "1e-05"},
    {0.0001, "0.0001"},
    {0.00012345, "0.00012345"},
    {1.2345e-05, "1.2345e-05"},
    {1e+16, "1e+16"},
    {1000000000000000.0, "1000000000000000.0"},
    {1000000000000000.2, "1000000000000000.2"},
    {9999999999999998.0, "9999999999999998.0"},
    {5e-324, "5e-324"},
    {1.5e-323, "1.5e-323"},
    {2.2250738585072014e-308, "2.2250738585072014e-308"},
    {2.225073858507201e-308, "2.225073858507201e-308"},
    {1.7976931348623157e+308, "1.7976931348623157e+308"},
    {0.30000000000000004, "0.30000000000000004"},
    {1e+22, "1e+22"},
    {1e+21, "1e+21"},
    {1e+23, "1e+23"},
    {1e+100, "1e+100"},
    {-1e-100, "-1e-100"},
    {123456789012345678.0, "1.2345678901234568e+17"},
    {12345678901234567890.0, "1.2345678901234567e+19"},
    {9007199254740993.0, "9007199254740992.0"},
    {0.1, "0.1"},
    {0.5, "0.5"},
    {0.001, "0.001"},
    {1.5, "1.5"},
    {-2.5, "-2.5"},
    {3.0, "3.0"},
    {100.0, "100.0"},
    {500000.0, "500000.0"},
    {1e-07, "1e-07"},
    {1.5e-07, "1.5e-07"},
    {1234.5678, "1234.5678"},
    {123456789.123, "123456789.123"},
};

TEST(PyjsonFloatRepr, MatchesCPythonRepr) {
  for (const auto& [value, repr] : kReprCases) EXPECT_EQ(float_repr(value), repr);
}

TEST(PyjsonFloatRepr, NonFinite) {
  EXPECT_EQ(float_repr(std::numeric_limits<double>::quiet_NaN()), "nan");
  EXPECT_EQ(float_repr(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(float_repr(-std::numeric_limits<double>::infinity()), "-inf");
}

TEST(PyjsonFloatRepr, DumpsUsesReprAndParseRoundTrips) {
  for (const auto& [value, repr] : kReprCases) {
    EXPECT_EQ(dumps(Json(value)), repr);
    double back = parse(repr).get<double>();
    EXPECT_EQ(back, value) << repr;
    EXPECT_EQ(std::signbit(back), std::signbit(value)) << repr;
  }
}

}  // namespace
}  // namespace neuron_cache::pyjson
