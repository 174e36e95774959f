#include "common/pickle.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <doctest/doctest.h>

#include "tests/unit/common/pickle_canonical.h"
#include "tests/unit/common/swift_vectors.h"

namespace apus::common::pickle {

// For doctest's failure messages.
std::ostream& operator<<(std::ostream& os, const Value& v) { return os << v.debug_string(); }

namespace {

using namespace std::string_literals;
using testing::canonical;

// At most the first 120 hex digits of `data`, for failure messages.
std::string short_hex(std::string_view data) {
  return testing::hex(data.substr(0, 60)) + (data.size() > 60 ? "..." : "");
}

Value load_ok(std::string_view data) {
  Result<Value> r = loads(data);
  INFO("pickle: ", short_hex(data));
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  return *r;
}

// loads() fails with Corruption and a message containing `what`.
void check_corrupt(std::string_view data, std::string_view what) {
  Result<Value> r = loads(data);
  INFO("pickle: ", short_hex(data));
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == Status::Code::kCorruption);
  CHECK_MESSAGE(r.status().message().find(what) != std::string::npos, r.status().message());
}

// String literals keep their embedded NULs this way.
template <size_t N>
Value load_ok(const char (&literal)[N]) {
  return load_ok(std::string_view(literal, N - 1));
}
template <size_t N>
void check_corrupt(const char (&literal)[N], std::string_view what) {
  check_corrupt(std::string_view(literal, N - 1), what);
}

Value S(std::string s) { return Value::str(std::move(s)); }
Value B(std::string s) { return Value::bytes(std::move(s)); }
Value I(int64_t i) { return Value::integer(i); }

// ------------------------------------------------------------------------------ Value

TEST_CASE("pickle Value: factories, accessors, find and set") {
  Value d = Value::dict();
  d.set(S("a"), I(1));
  d.set(B("b"), S("x"));
  d.set(I(1), Value::none());
  d.set(Value::boolean(true), Value::floating(2.0));  // True == 1: same key, new value
  d.set(Value::floating(1.0), Value::floating(3.0));  // and 1.0 too
  REQUIRE(d.as_dict().size() == 3);
  CHECK(d.as_dict()[2].first == I(1));
  CHECK(d.as_dict()[2].second == Value::floating(3.0));
  CHECK(d.find("a")->as_int() == 1);
  CHECK(d.find("b")->as_str() == "x");
  CHECK(d.find("c") == nullptr);
}

TEST_CASE("pickle Value: kinds, equality and debug_string") {
  CHECK(Value().is_none());
  CHECK(Value::none() == Value());
  CHECK(Value::boolean(true).as_bool());
  CHECK(I(-5).as_int() == -5);
  CHECK(Value::floating(1.5).as_float() == 1.5);
  CHECK(S("\xc3\xa9").as_string() == "\xc3\xa9");
  CHECK(B("\xff").as_string() == "\xff");
  CHECK(I(1) != Value::boolean(true));
  CHECK(I(1) != Value::floating(1.0));
  CHECK(S("a") != B("a"));
  CHECK(Value::list({I(1)}) != Value::tuple({I(1)}));
  CHECK(Value::list({I(1)}).as_list().size() == 1);
  CHECK(Value::tuple({I(1)}).as_list().size() == 1);
  CHECK(Value::dict({{S("a"), I(1)}, {S("b"), I(2)}}) !=
        Value::dict({{S("b"), I(2)}, {S("a"), I(1)}}));
  CHECK(Value::floating(NAN) != Value::floating(NAN));
  CHECK(I(1).find("a") == nullptr);

  const Value v = Value::dict({{S("a"), Value::list({I(1), Value::floating(1e16), Value::none()})},
                               {B("b\x01'"), Value::tuple({Value::boolean(false)})},
                               {S("\xc3\xa9\xe4\xb8\xad\n"), Value::tuple()}});
  CHECK(v.debug_string() ==
        "{'a': [1, 1e+16, None], b'b\\x01\\'': (False,), '\\xe9\\u4e2d\\n': ()}");
}

// ------------------------------------------------------------------------------ loads

// {'a': [1, (2,), (3, 4), (5, 6, 7), (8, 9, 10, 11), (), True, False, None, 1.5, b'xy', 'é', 256,
//        -1, 2**40, -2**63], 'b': {None: 'h', 3: 'i'}}
Value composite() {
  return Value::dict(
      {{S("a"),
        Value::list({I(1), Value::tuple({I(2)}), Value::tuple({I(3), I(4)}),
                     Value::tuple({I(5), I(6), I(7)}), Value::tuple({I(8), I(9), I(10), I(11)}),
                     Value::tuple(), Value::boolean(true), Value::boolean(false), Value::none(),
                     Value::floating(1.5), B("xy"), S("\xc3\xa9"), I(256), I(-1),
                     I(int64_t{1} << 40), I(std::numeric_limits<int64_t>::min())})},
       {S("b"), Value::dict({{Value::none(), S("h")}, {I(3), S("i")}})}});
}

// Python 3.11's pickle.dumps(composite, protocol).
const std::string kComposite0 =
    "(dp0\nVa\np1\n(lp2\nI1\na(I2\ntp3\na(I3\nI4\ntp4\na(I5\nI6\nI7\ntp5\na(I8\nI9\nI10\nI11\n"
    "tp6\na(taI01\naI00\naNaF1.5\nac_codecs\nencode\np7\n(Vxy\np8\nVlatin1\np9\ntp10\nRp11\naV\xe9"
    "\np12\naI256\naI-1\naL1099511627776L\naL-9223372036854775808L\nasVb\np13\n(dp14\nNVh\np15\n"
    "sI3\nVi\np16\nss."s;
const std::string kComposite2 =
    "\x80\x02}q\x00(X\x01\x00\x00\x00"
    "aq\x01]q\x02(K\x01K\x02\x85q\x03K\x03K\x04\x86q\x04K\x05K\x06K\x07\x87q\x05(K\x08K\x09K\nK"
    "\x0btq\x06)\x88\x89NG?\xf8\x00\x00\x00\x00\x00\x00"
    "c_codecs\nencode\nq\x07X\x02\x00\x00\x00xyq\x08X\x06\x00\x00\x00latin1q\x09\x86q\nRq\x0bX\x02"
    "\x00\x00\x00\xc3\xa9q\x0cM\x00\x01J\xff\xff\xff\xff\x8a\x06\x00\x00\x00\x00\x00\x01\x8a\x08"
    "\x00\x00\x00\x00\x00\x00\x00\x80"
    "eX\x01\x00\x00\x00"
    "bq\x0d}q\x0e(NX\x01\x00\x00\x00hq\x0fK\x03X\x01\x00\x00\x00iq\x10uu."s;
const std::string kComposite4 =
    "\x80\x04\x95p\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x01"
    "a\x94]\x94(K\x01K\x02\x85\x94K\x03K\x04\x86\x94K\x05K\x06K\x07\x87\x94(K\x08K\x09K\nK\x0bt"
    "\x94)\x88\x89NG?\xf8\x00\x00\x00\x00\x00\x00"
    "C\x02xy\x94\x8c\x02\xc3\xa9\x94M\x00\x01J\xff\xff\xff\xff\x8a\x06\x00\x00\x00\x00\x00\x01\x8a"
    "\x08\x00\x00\x00\x00\x00\x00\x00\x80"
    "e\x8c\x01"
    "b\x94}\x94(N\x8c\x01h\x94K\x03\x8c\x01i\x94uu."s;

TEST_CASE("pickle loads: Python's protocols 0, 2 and 4 of the same value") {
  CHECK(load_ok(kComposite0) == composite());
  CHECK(load_ok(kComposite2) == composite());
  CHECK(load_ok(kComposite4) == composite());
}

TEST_CASE("pickle loads: scalar opcodes") {
  CHECK(load_ok("\x80\x02N.") == Value::none());
  CHECK(load_ok("N.") == Value::none());
  CHECK(load_ok("\x80\x02\x88.") == Value::boolean(true));
  CHECK(load_ok("\x80\x02\x89.") == Value::boolean(false));
  CHECK(load_ok("I01\n.") == Value::boolean(true));  // Python 2 booleans
  CHECK(load_ok("I00\n.") == Value::boolean(false));
  CHECK(load_ok("I1\n.") == I(1));
  CHECK(load_ok("I0\n.") == I(0));
  CHECK(load_ok("I-42\n.") == I(-42));
  CHECK(load_ok("I+42\n.") == I(42));
  CHECK(load_ok("I+1\n.") == Value::boolean(true));  // as CPython: any 2-character 0 or 1
  CHECK(load_ok("I-0\n.") == Value::boolean(false));
  CHECK(load_ok("I-1\n.") == I(-1));
  CHECK(load_ok("I9223372036854775807\n.") == I(std::numeric_limits<int64_t>::max()));
  CHECK(load_ok("L5L\n.") == I(5));
  CHECK(load_ok("L-9223372036854775808L\n.") == I(std::numeric_limits<int64_t>::min()));
  CHECK(load_ok("L7\n.") == I(7));
  CHECK(load_ok("K\xff.") == I(255));
  CHECK(load_ok("M\xff\xff.") == I(65535));
  CHECK(load_ok("J\x00\x00\x00\x80.") == I(INT32_MIN));
  CHECK(load_ok("\x8a\x00.") == I(0));
  CHECK(load_ok("\x8a\x01\xff.") == I(-1));
  CHECK(load_ok("\x8a\x05\x00\x00\x00\x80\x00.") == I(int64_t{1} << 31));
  CHECK(load_ok("\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f.") ==
        I(std::numeric_limits<int64_t>::max()));
  // Redundant sign bytes are fine.
  CHECK(load_ok("\x8a\x0a\xfe\xff\xff\xff\xff\xff\xff\xff\xff\xff.") == I(-2));
  CHECK(load_ok("\x8a\x09\x01\x00\x00\x00\x00\x00\x00\x00\x00.") == I(1));
  CHECK(load_ok("\x8b\x02\x00\x00\x00\xff\x7f.") == I(32767));
  CHECK(load_ok("F1.5\n.") == Value::floating(1.5));
  CHECK(load_ok("F-1e-05\n.") == Value::floating(-1e-05));
  CHECK(load_ok("F+2\n.") == Value::floating(2));
  CHECK(std::isinf(load_ok("Finf\n.").as_float()));
  CHECK(std::isnan(load_ok("Fnan\n.").as_float()));
  CHECK(load_ok("G?\xf8\x00\x00\x00\x00\x00\x00.") == Value::floating(1.5));
  CHECK(load_ok("G\x80\x00\x00\x00\x00\x00\x00\x00.").as_float() == 0.0);
  CHECK(std::signbit(load_ok("G\x80\x00\x00\x00\x00\x00\x00\x00.").as_float()));
}

TEST_CASE("pickle loads: strings") {
  CHECK(load_ok("X\x02\x00\x00\x00\xc3\xa9.") == S("\xc3\xa9"));
  CHECK(load_ok("\x8c\x03\xe4\xb8\xad.") == S("\xe4\xb8\xad"));
  CHECK(load_ok("\x8d\x01\x00\x00\x00\x00\x00\x00\x00z.") == S("z"));
  // Lone surrogates stay in their 3-byte form (Python's surrogatepass).
  CHECK(load_ok("X\x03\x00\x00\x00\xed\xb2\x80.") == S("\xed\xb2\x80"));
  CHECK(load_ok("U\x03"
                "a\x00"
                "b.") == B("a\0b"s));
  CHECK(load_ok("T\x02\x00\x00\x00\xc3\xa9.") == B("\xc3\xa9"));
  CHECK(load_ok("C\x01\xff.") == B("\xff"));
  CHECK(load_ok("B\x01\x00\x00\x00\xff.") == B("\xff"));
  CHECK(load_ok("\x8e\x01\x00\x00\x00\x00\x00\x00\x00\xff.") == B("\xff"));
  // Protocol 0 unicode: latin-1 bytes plus \u escapes after an odd run of backslashes.
  CHECK(load_ok("Vcaf\xe9\n.") == S("caf\xc3\xa9"));
  CHECK(load_ok("V\\u4e2d\\U0001F600\\u005c\n.") == S("\xe4\xb8\xad\xf0\x9f\x98\x80\\"));
  CHECK(load_ok("V\\\\u0041\n.") == S("\\\\u0041"));
  CHECK(load_ok("V\\\\\\u0041\n.") == S("\\\\A"));
  CHECK(load_ok("Va\\b\\\n.") == S("a\\b\\"));
  CHECK(load_ok("V\\ud800\n.") == S("\xed\xa0\x80"));
  CHECK(load_ok("V\n.") == S(""));
  // Protocol 0 Python 2 strings: quoted repr with escapes.
  CHECK(load_ok("S'caf\\xc3\\xa9'\n.") == B("caf\xc3\xa9"));
  CHECK(load_ok("S\"it's\"\n.") == B("it's"));
  CHECK(load_ok("S'\\'\\\\\\n\\t\\r\\a\\b\\f\\v\\0\\101\\7777'\n.") == B("'\\\n\t\r\a\b\f\v\0A\xff"s
                                                                         "7"s));
  CHECK(load_ok("S'\\q'\n.") == B("\\q"));
  CHECK(load_ok("S''\n.") == B(""));
}

TEST_CASE("pickle loads: containers, marks and the memo") {
  CHECK(load_ok("(lp0\nI1\naI2\na.") == Value::list({I(1), I(2)}));
  CHECK(load_ok("(I1\nI2\nl.") == Value::list({I(1), I(2)}));
  CHECK(load_ok("(I1\nI2\nt.") == Value::tuple({I(1), I(2)}));
  CHECK(load_ok("(t.") == Value::tuple());
  CHECK(load_ok("(I1\nI2\nd.") == Value::dict({{I(1), I(2)}}));
  CHECK(load_ok("(d.") == Value::dict());
  CHECK(load_ok("}(K\x01K\x02K\x03K\x04u.") == Value::dict({{I(1), I(2)}, {I(3), I(4)}}));
  CHECK(load_ok("](K\x01K\x02"
                "e.") == Value::list({I(1), I(2)}));
  CHECK(load_ok("](e.") == Value::list());
  // GET/PUT in all three widths, MEMOIZE, and the same object referenced twice.
  CHECK(load_ok("K\x07p5\n0g5\n.") == I(7));
  CHECK(load_ok("K\x07r\x00\x01\x00\x00"
                "0j\x00\x01\x00\x00.") == I(7));
  CHECK(load_ok("\x80\x04K\x07\x94"
                "0h\x00.") == I(7));
  CHECK(load_ok("]q\x01K\x01"
                "a]h\x01"
                "a.") == Value::list({Value::list({I(1)})}));
  const Value shared = Value::list({I(1)});
  CHECK(load_ok("](]q\x01K\x01"
                "ah\x01"
                "e.") == Value::list({shared, shared}));
  // A container filled after it was memoized is seen filled through the memo.
  CHECK(load_ok("(]q\x00h\x00K\x01"
                "at.") == Value::tuple({shared, shared}));
  // POP, POP_MARK, DUP.
  CHECK(load_ok("K\x01K\x02"
                "0.") == I(1));
  CHECK(load_ok("K\x01(K\x02K\x03"
                "1.") == I(1));
  CHECK(load_ok("K\x01(0.") == I(1));  // POP of an empty mark drops the mark
  CHECK(load_ok("K\x01"
                "2\x86.") == Value::tuple({I(1), I(1)}));
  // PROTO and FRAME are only headers.
  CHECK(load_ok("\x80\x05\x95\x01\x00\x00\x00\x00\x00\x00\x00N.") == Value::none());
  // Bytes after STOP are ignored, as by Python.
  CHECK(load_ok("N.garbage") == Value::none());
}

TEST_CASE("pickle loads: duplicate dict keys behave as in a Python dict") {
  // {1: 'a', True: 'b', 1.0: 'c', 'x': 1, b'x': 2, 'x': 3} == {1: 'c', 'x': 3, b'x': 2}
  const Value v = load_ok(
      "\x80\x02}(K\x01X\x01\x00\x00\x00"
      "a\x88X\x01\x00\x00\x00"
      "bG?\xf0\x00\x00\x00\x00\x00\x00"
      "X\x01\x00\x00\x00"
      "cX\x01\x00\x00\x00xK\x01"
      "C\x01xK\x02X\x01\x00\x00\x00xK\x03u."s);
  CHECK(v == Value::dict({{I(1), S("c")}, {S("x"), I(3)}, {B("x"), I(2)}}));
  // NaN keys are never equal; tuples compare item by item.
  const Value nan = load_ok(
      "}(G\x7f\xf8\x00\x00\x00\x00\x00\x00K\x01G\x7f\xf8\x00\x00\x00\x00"
      "\x00\x00K\x02K\x01K\x02\x86K\x03\x88K\x02\x86K\x04u."s);
  CHECK(nan.as_dict().size() == 3);
  CHECK(nan.as_dict()[2].second == I(4));
}

TEST_CASE("pickle loads: the globals Swift uses") {
  // Python 3's bytes at protocols 0-2, and the empty bytes form.
  CHECK(load_ok("c_codecs\nencode\n(V\xe9\nVlatin1\ntR.") == B("\xe9"));
  CHECK(load_ok("\x80\x02"
                "c_codecs\nencode\nX\x02\x00\x00\x00\xc3\xa9X\x07\x00\x00\x00latin-1"
                "\x86R.") == B("\xe9"));
  CHECK(load_ok("c__builtin__\nbytes\n(tR.") == B(""));
  CHECK(load_ok("cbuiltins\nbytes\nC\x02hi\x85R.") == B("hi"));
  CHECK(load_ok("\x80\x04\x8c\x07_codecs\x8c\x06"
                "encode\x93\x8c\x01x\x8c\x06latin1\x86R.") == B("x"));
  CHECK(load_ok("c__builtin__\ndict\n)R.") == Value::dict());
  CHECK(load_ok("cbuiltins\ndict\n(}K\x01K\x02stR.") == Value::dict({{I(1), I(2)}}));
  // async_pending headers: a HeaderKeyDict rebuilt through copy_reg._reconstructor.
  const std::string headers =
      "(dp0\nVheaders\np1\nccopy_reg\n_reconstructor\np2\n(cswift.common.header_key_dict\n"
      "HeaderKeyDict\np3\nc__builtin__\ndict\np4\n(dp5\nVX-Timestamp\np6\nV1.0\np7\nsVX-Size\np8\n"
      "V5\np9\nstp10\nRp11\nsVsuccesses\np12\n(lp13\nI1\naI2\nas.";
  CHECK(load_ok(headers) == Value::dict({{S("headers"), Value::dict({{S("X-Timestamp"), S("1.0")},
                                                                     {S("X-Size"), S("5")}})},
                                         {S("successes"), Value::list({I(1), I(2)})}}));
  CHECK(load_ok("ccopyreg\n_reconstructor\n(c__builtin__\ndict\ncbuiltins\ndict\n}tR.") ==
        Value::dict());
  // BUILD with an empty state changes nothing (a HeaderKeyDict's empty __dict__).
  CHECK(load_ok("}N\x62.") == Value::dict());
  CHECK(load_ok("}}\x62.") == Value::dict());
}

TEST_CASE("pickle loads: refuses code, objects and other globals") {
  check_corrupt("cos\nsystem\n(S'echo hi'\ntR.", "global os.system is not allowed");
  check_corrupt(
      "\x80\x02"
      "cbuiltins\neval\nX\x01\x00\x00\x00"
      "1\x85R.",
      "global builtins.eval");
  check_corrupt("c__builtin__\ngetattr\n.", "global __builtin__.getattr");
  check_corrupt("c__builtin__\nobject\n.", "not allowed");
  check_corrupt("csubprocess\ncall\n.", "not allowed");
  check_corrupt("\x80\x04\x8c\x02os\x8c\x06system\x93.", "global os.system is not allowed");
  check_corrupt("\x80\x04\x8c\x02os\x8c\x06system\x93.", "offset 14");
  check_corrupt("(S'ls'\nios\nsystem\n.", "opcode INST is not supported");
  check_corrupt("(o.", "opcode OBJ");
  check_corrupt(
      "\x80\x02"
      "cswift.common.header_key_dict\nHeaderKeyDict\n)\x81.",
      "NEWOBJ");
  check_corrupt("\x80\x02\x82\x01.", "EXT1");
  check_corrupt("P1\n.", "PERSID");
  check_corrupt("N\x51.", "BINPERSID");
  check_corrupt("\x80\x04\x8f.", "EMPTY_SET");
  check_corrupt("\x80\x04(\x91.", "FROZENSET");
  check_corrupt("\x80\x05\x96\x00\x00\x00\x00\x00\x00\x00\x00.", "BYTEARRAY8");
  check_corrupt("\xff.", "unknown opcode 0xff");
  // The allowed globals only do what Swift's pickles need.
  check_corrupt("cswift.common.header_key_dict\nHeaderKeyDict\n)R.", "HeaderKeyDict");
  check_corrupt("c_codecs\nencode\n(Vx\nVutf-8\ntR.", "_codecs.encode needs");
  check_corrupt("c_codecs\nencode\n(Vx\ntR.", "_codecs.encode needs");
  check_corrupt("c_codecs\nencode\n(V\\u4e2d\nVlatin1\ntR.", "not latin-1");
  check_corrupt("c__builtin__\nbytes\n(I5\ntR.", "bytes()");
  check_corrupt("c__builtin__\ndict\n(I5\ntR.", "dict()");
  check_corrupt("ccopy_reg\n_reconstructor\n(c__builtin__\ndict\nc__builtin__\nbytes\n}tR.",
                "_reconstructor needs");
  check_corrupt("N(tR.", "REDUCE of a non-callable");
  check_corrupt("c__builtin__\ndict\nNR.", "not a tuple");
  check_corrupt("}}K\x01K\x02s\x62.", "BUILD with object state");
  check_corrupt("c_codecs\nencode\n.", "a global is not a value");
  check_corrupt("(c_codecs\nencode\nl.", "a global is not a value");
}

TEST_CASE("pickle loads: malformed input is Corruption") {
  check_corrupt("", "truncated (no STOP)");
  check_corrupt("\x80", "truncated");
  check_corrupt("\x80\x02", "truncated (no STOP) at offset 2");
  check_corrupt("\x80\x06N.", "unsupported protocol 6");
  check_corrupt(".", "stack underflow");
  check_corrupt("(.", "stack underflow");
  check_corrupt("N(.", "stack underflow");  // items below a MARK are out of reach
  check_corrupt("Na.", "stack underflow");
  check_corrupt("(Na.", "stack underflow");
  check_corrupt("NNa.", "APPEND to a non-list");
  check_corrupt(")(Ne.", "APPENDS to a non-list");
  check_corrupt("(Ne.", "stack underflow");
  check_corrupt("NN\x87.", "stack underflow");
  check_corrupt("N(\x85.", "stack underflow");
  check_corrupt("}NNNu.", "no MARK");
  check_corrupt("}(Nu.", "odd number of items");
  check_corrupt("(Nd.", "odd number of items");
  check_corrupt("]NNs.", "SETITEM on a non-dict");
  check_corrupt("0.", "stack underflow");
  check_corrupt("1.", "no MARK");
  check_corrupt("2.", "stack underflow");
  check_corrupt(
      "X\xff\xff\xff\xff"
      "ab.",
      "truncated");
  check_corrupt("\x8d\xff\xff\xff\xff\xff\xff\xff\xff.", "truncated");
  check_corrupt("\x8e\x00\x00\x00\x00\x00\x00\x00\x80.", "truncated");
  check_corrupt("\x95\x00\x01\x00\x00\x00\x00\x00\x00N.", "truncated");
  check_corrupt("T\xff\xff\xff\xff.", "negative length");
  check_corrupt("X\x02\x00\x00\x00\xc3(.", "not valid UTF-8");
  check_corrupt("X\x02\x00\x00\x00\xc0\x80.", "not valid UTF-8");          // overlong
  check_corrupt("X\x04\x00\x00\x00\xf4\x90\x80\x80.", "not valid UTF-8");  // > U+10FFFF
  check_corrupt("h\x05.", "memo entry 5 not found");
  check_corrupt("g7\n.", "memo entry 7 not found");
  check_corrupt("q\x00.", "stack underflow");
  check_corrupt("Np-1\n.", "bad memo index");
  check_corrupt("Np\n.", "bad memo index");
  check_corrupt("I12a\n.", "bad INT");
  check_corrupt("I\n.", "bad INT");
  check_corrupt("I-\n.", "bad INT");
  check_corrupt("I+-5\n.", "bad INT");
  check_corrupt("I010\n.", "bad INT");  // octal to CPython
  check_corrupt("I9223372036854775808\n.", "INT out of int64 range");
  check_corrupt("I1", "truncated");
  check_corrupt("L99999999999999999999L\n.", "LONG out of int64 range");
  check_corrupt("L0x10\n.", "bad LONG");
  check_corrupt("\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00.", "LONG out of int64 range");
  check_corrupt("\x8a\x09\xff\xff\xff\xff\xff\xff\xff\x7f\xff.", "LONG out of int64 range");
  check_corrupt("\x8b\x00\x00\x00\x80.", "negative length");
  check_corrupt("\x8a\x05\x00\x00.", "truncated");
  check_corrupt("F1.5x\n.", "bad FLOAT");
  check_corrupt("F\n.", "bad FLOAT");
  check_corrupt("F+-1\n.", "bad FLOAT");
  check_corrupt("Fnan(1)\n.", "bad FLOAT");
  check_corrupt("F1e999\n.", "FLOAT out of double range");
  check_corrupt("G\x00\x00.", "truncated");
  check_corrupt("S'abc\n.", "must be quoted");
  check_corrupt("S'abc\"\n.", "must be quoted");
  check_corrupt("S'\n.", "must be quoted");
  check_corrupt("S'a\\x4'\n.", "bad \\x escape");
  check_corrupt("S'a\\'\n.", "ends in a backslash");
  check_corrupt("Vab\\u12\n.", "truncated \\u escape");
  check_corrupt("V\\u12g4\n.", "bad \\u escape");
  check_corrupt("V\\U00110000\n.", "out of range");
  check_corrupt("Vabc", "truncated");
  check_corrupt("c_codecs\nencode", "truncated");
  check_corrupt("}]Ns.", "unhashable dict key");
  check_corrupt("}]\x85Ns.", "unhashable dict key");  // a tuple holding a list
  check_corrupt("}}\x85Ns.", "unhashable dict key");
}

TEST_CASE("pickle loads: recursion, nesting and expansion are bounded") {
  check_corrupt(
      "]q\x00h\x00"
      "a.",
      "recursive structure");
  check_corrupt("}q\x00K\x01h\x00s.", "recursive structure");
  check_corrupt(
      "(]q\x00h\x00\x85q\x01"
      "1h\x00h\x01"
      "a.",
      "recursive structure");

  auto nested = [](int depth) {
    return std::string(static_cast<size_t>(depth), ']') +
           std::string(static_cast<size_t>(depth - 1), 'a') + ".";
  };
  const Value deepest = load_ok(nested(kMaxDepth + 1));
  int depth = 0;
  for (const Value* v = &deepest; !v->as_list().empty(); v = &v->as_list()[0]) ++depth;
  CHECK(depth == kMaxDepth);
  check_corrupt(nested(kMaxDepth + 2), "nested deeper than 100");

  // "Billion laughs": each level is a list holding the previous level twice.
  std::string laughs = "]q\x00"s;
  for (int level = 0; level < 60; ++level) {
    laughs += "(h";
    laughs += static_cast<char>(level);
    laughs += 'h';
    laughs += static_cast<char>(level);
    laughs += "lq";
    laughs += static_cast<char>(level + 1);
  }
  laughs += '.';
  check_corrupt(laughs, "expands too much");
  // The same with a long string shared instead of a deep structure.
  std::string wide = "X\x00\x00\x01\x00"s + std::string(65536, 'x') + "q\x00("s;
  for (int i = 0; i < 200; ++i) wide += "h\x00"s;
  wide += "l.";
  check_corrupt(wide, "expands too much");
  // Sharing within the allowance is fine.
  std::string some = "X\x00\x01\x00\x00"s + std::string(256, 'x') + "q\x00("s;
  for (int i = 0; i < 40; ++i) some += "h\x00"s;
  some += "l.";
  CHECK(load_ok(some).as_list().size() == 40);
}

TEST_CASE("pickle loads: every truncation of a valid pickle fails cleanly") {
  const std::vector<std::string> pickles = {
      kComposite0,
      kComposite2,
      kComposite4,
      dumps(Value::dict({{B("\xff"), Value::list({Value::floating(0.1), I(1)})}}), 0),
      "S'caf\\xc3\\xa9'\n.",
      "\x80\x02\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80."s};
  int failures = 0;
  for (const std::string& p : pickles) {
    REQUIRE(loads(p).ok());
    for (size_t n = 0; n < p.size(); ++n) {
      const Result<Value> r = loads(std::string_view(p).substr(0, n));
      if (r.ok() || r.status().code() != Status::Code::kCorruption) ++failures;
    }
  }
  CHECK(failures == 0);
}

// ------------------------------------------------------------------------------ dumps

TEST_CASE("pickle dumps: byte-identical to Python 3 for known values") {
  CHECK(dumps(Value::none(), 2) == "\x80\x02N."s);
  CHECK(dumps(Value::none(), 0) == "N.");
  CHECK(dumps(composite(), 0) == kComposite0);
  CHECK(dumps(composite(), 2) == kComposite2);
  // Python: pickle.dumps({b'ab': b'\xc3\xa9', b'': b'x', b'y': b'x', b'z': b''}, p). The
  // one-byte and empty bytes are CPython singletons, so they are written once.
  const Value shared =
      Value::dict({{B("ab"), B("\xc3\xa9")}, {B(""), B("x")}, {B("y"), B("x")}, {B("z"), B("")}});
  CHECK(dumps(shared, 0) ==
        "(dp0\nc_codecs\nencode\np1\n(Vab\np2\nVlatin1\np3\ntp4\nRp5\ng1\n(V\xc3\xa9\np6\ng3\ntp7\n"
        "Rp8\nsc__builtin__\nbytes\np9\n(tRp10\ng1\n(Vx\np11\ng3\ntp12\nRp13\nsg1\n(Vy\np14\ng3\n"
        "tp15\nRp16\ng13\nsg1\n(Vz\np17\ng3\ntp18\nRp19\ng10\ns."s);
  CHECK(dumps(shared, 2) ==
        "\x80\x02}q\x00(c_codecs\nencode\nq\x01X\x02\x00\x00\x00"
        "abq\x02X\x06\x00\x00\x00latin1"
        "q\x03\x86q\x04Rq\x05h\x01X\x04\x00\x00\x00\xc3\x83\xc2\xa9q\x06h\x03\x86q\x07Rq\x08"
        "c__builtin__\nbytes\nq\x09)Rq\nh\x01X\x01\x00\x00\x00xq\x0bh\x03\x86q\x0cRq\rh\x01X\x01"
        "\x00\x00\x00yq\x0eh\x03\x86q\x0fRq\x10h\rh\x01X\x01\x00\x00\x00zq\x11h\x03\x86q\x12Rq"
        "\x13h\nu."s);
  // Protocol 0 floats are repr(); ints switch to LONG beyond 32 bits.
  const Value numbers = Value::list({Value::floating(1.5e16),
                                     Value::floating(1e16),
                                     Value::floating(1e-5),
                                     Value::floating(1e-4),
                                     Value::floating(-0.0),
                                     Value::floating(INFINITY),
                                     Value::floating(NAN),
                                     Value::floating(1e300),
                                     Value::floating(123456789012345678.0),
                                     Value::floating(5e-324),
                                     Value::boolean(true),
                                     Value::boolean(false),
                                     I(-1),
                                     I(256),
                                     I(65536),
                                     I(int64_t{1} << 31),
                                     I(INT32_MIN),
                                     I(int64_t{INT32_MIN} - 1),
                                     I(std::numeric_limits<int64_t>::max()),
                                     I(std::numeric_limits<int64_t>::min()),
                                     I(-128),
                                     I(-129),
                                     I(255),
                                     I(int64_t{1} << 40)});
  CHECK(dumps(numbers, 0) ==
        "(lp0\nF1.5e+16\naF1e+16\naF1e-05\naF0.0001\naF-0.0\naFinf\naFnan\naF1e+300\naF1.2345678901"
        "234568e+17\naF5e-324\naI01\naI00\naI-1\naI256\naI65536\naL2147483648L\naI-2147483648\naL-"
        "2147483649L\naL9223372036854775807L\naL-9223372036854775808L\naI-128\naI-129\naI255\naL10"
        "99511627776L\na.");
  const Value longs =
      Value::list({I(int64_t{1} << 31), I(std::numeric_limits<int64_t>::min()),
                   I(std::numeric_limits<int64_t>::max()), I(int64_t{INT32_MIN} - 1),
                   I(-(int64_t{1} << 39)), I(-(int64_t{1} << 31) - (int64_t{1} << 30))});
  CHECK(dumps(longs, 2) ==
        "\x80\x02]q\x00(\x8a\x05\x00\x00\x00\x80\x00\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80\x8a"
        "\x08\xff\xff\xff\xff\xff\xff\xff\x7f\x8a\x05\xff\xff\xff\x7f\xff\x8a\x05\x00\x00\x00\x00"
        "\x80\x8a\x05\x00\x00\x00@\xff"
        "e."s);
  CHECK(dumps(Value::list({Value::boolean(true), I(int64_t{1} << 31)}), 1) ==
        "]q\x00(I01\nL2147483648L\ne."s);
  // Protocol 0 text: raw-unicode-escape plus escapes for what would break the line.
  CHECK(dumps(S("a\\b\0\n\r\x1a\xc3\xbf\xc4\x80\xf0\x9f\x98\x80\xed\xa0\x80 "s), 0) ==
        "Va\\u005cb\\u0000\\u000a\\u000d\\u001a\xff\\u0100\\U0001f600\\ud800 \np0\n."s);
  // Tuples: short forms at protocol 2, the empty tuple is never memoized.
  CHECK(dumps(Value::tuple({I(1), I(2), Value::tuple(), Value::list()}), 0) ==
        "(I1\nI2\n(t(lp0\ntp1\n.");
  CHECK(dumps(Value::tuple({I(1), I(2), Value::tuple(), Value::list()}), 2) ==
        "\x80\x02(K\x01K\x02)]q\x00tq\x01."s);
}

TEST_CASE("pickle dumps: text that is not UTF-8 is written as surrogate escapes") {
  const Value v = load_ok(dumps(S("a\xff\xc3"), 2));
  CHECK(v == S("a\xed\xb3\xbf\xed\xb3\x83"));  // U+DCFF U+DCC3
  CHECK(load_ok(dumps(S("a\xff"), 0)) == S("a\xed\xb3\xbf"));
}

TEST_CASE("pickle dumps: long lists and dicts are batched and memo indices grow wide") {
  Value::List items;
  Value::Dict entries;
  for (int i = 0; i < 2500; ++i) {
    items.push_back(S("s" + std::to_string(i)));
    entries.emplace_back(S("k" + std::to_string(i)), I(i));
  }
  for (int proto = 0; proto <= 2; ++proto) {
    const std::string p = dumps(Value::list(items), proto);
    CHECK(load_ok(p) == Value::list(items));
    CHECK(load_ok(dumps(Value::dict(entries), proto)) == Value::dict(entries));
    if (proto > 0) {
      CHECK(std::count(p.begin(), p.end(), 'e') >= 3);           // APPENDS per 1000 items
      CHECK(p.find("r\x00\x01\x00\x00"s) != std::string::npos);  // LONG_BINPUT 256
    }
  }
}

// Random values of every kind; dict keys are hashable and distinct (Value::set merges).
class RandomValues {
 public:
  explicit RandomValues(uint32_t seed) : rng_(seed) {}

  Value value(int depth = 0) {
    const int k = pick(depth >= 3 ? 8 : 12);
    switch (k) {
      case 0:
        return Value::none();
      case 1:
        return Value::boolean(pick(2) == 1);
      case 2:
        return I(integer());
      case 3:
        return Value::floating(floating());
      case 4:
      case 5:
        return S(text());
      case 6:
      case 7:
        return B(raw());
      case 8:
      case 9: {
        Value::List items;
        for (int i = pick(6); i > 0; --i) items.push_back(value(depth + 1));
        return pick(2) ? Value::list(std::move(items)) : Value::tuple(std::move(items));
      }
      default: {
        Value d = Value::dict();
        for (int i = pick(6); i > 0; --i) d.set(key(), value(depth + 1));
        return d;
      }
    }
  }

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }

  int64_t integer() {
    static const int64_t kEdges[] = {0,
                                     1,
                                     -1,
                                     255,
                                     256,
                                     65535,
                                     65536,
                                     INT32_MAX,
                                     int64_t{INT32_MAX} + 1,
                                     INT32_MIN,
                                     int64_t{INT32_MIN} - 1,
                                     std::numeric_limits<int64_t>::max(),
                                     std::numeric_limits<int64_t>::min()};
    if (pick(2)) return kEdges[pick(std::size(kEdges))];
    return static_cast<int64_t>(rng_()) >> pick(64);
  }

  double floating() {
    if (pick(2)) return std::bit_cast<double>(static_cast<uint64_t>(rng_()));
    return std::uniform_real_distribution<double>(-1e6, 1e6)(rng_);
  }

  std::string text() {
    static const uint32_t kCodePoints[] = {
        'a',  'Z',  '0',  ' ',   '\\',   '\'',   '\n',   '\r',   0,       0x1A,    0x7F,
        0x80, 0xE9, 0xFF, 0x100, 0x4E2D, 0xD800, 0xDC80, 0xFFFF, 0x1F600, 0x10FFFF};
    std::string out;
    for (int n = pick(10); n > 0; --n) {
      const uint32_t cp = kCodePoints[pick(std::size(kCodePoints))];
      std::string one;
      if (cp < 0x80) {
        one += static_cast<char>(cp);
      } else if (cp < 0x800) {
        one += static_cast<char>(0xC0 | cp >> 6);
        one += static_cast<char>(0x80 | (cp & 0x3F));
      } else if (cp < 0x10000) {
        one += static_cast<char>(0xE0 | cp >> 12);
        one += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
        one += static_cast<char>(0x80 | (cp & 0x3F));
      } else {
        one += static_cast<char>(0xF0 | cp >> 18);
        one += static_cast<char>(0x80 | (cp >> 12 & 0x3F));
        one += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
        one += static_cast<char>(0x80 | (cp & 0x3F));
      }
      out += one;
    }
    return out;
  }

  std::string raw() {
    std::string out;
    for (int n = pick(10); n > 0; --n) out += static_cast<char>(rng_());
    return out;
  }

  Value key() {
    switch (pick(6)) {
      case 0:
        return I(integer());
      case 1:
        return B(raw());
      case 2:
        return Value::none();
      case 3:
        return Value::tuple({S(text()), I(integer())});
      default:
        return S(text());
    }
  }

  std::mt19937 rng_;
};

bool has_nan(const Value& v) {
  if (v.is_float()) return std::isnan(v.as_float());
  if (v.is_list() || v.is_tuple()) {
    return std::any_of(v.as_list().begin(), v.as_list().end(), has_nan);
  }
  if (v.is_dict()) {
    return std::any_of(v.as_dict().begin(), v.as_dict().end(),
                       [](const auto& e) { return has_nan(e.first) || has_nan(e.second); });
  }
  return false;
}

TEST_CASE("pickle dumps/loads: random values round trip at protocols 0, 1 and 2") {
  RandomValues gen(20240611);
  int checked = 0;
  for (int i = 0; i < 3000; ++i) {
    const Value v = gen.value();
    for (int proto = 0; proto <= 2; ++proto) {
      const std::string p = dumps(v, proto);
      const Result<Value> back = loads(p);
      REQUIRE_MESSAGE(back.ok(), back.status().to_string(), " for ", v.debug_string());
      // canonical() compares floats by bit pattern: NaN payloads survive protocols 1 and 2;
      // protocol 0 writes repr(), which keeps only 'nan'.
      if (proto > 0 || !has_nan(v)) CHECK(canonical(*back) == canonical(v));
      CHECK(dumps(*back, proto) == p);
      ++checked;
    }
  }
  CHECK(checked == 9000);
}

// ------------------------------------------------------------------------------ fuzz

TEST_CASE("pickle loads: random mutations never crash and whatever loads dumps again") {
  RandomValues gen(7);
  std::vector<std::string> seeds = {kComposite0, kComposite2, kComposite4};
  for (int i = 0; i < 60; ++i) seeds.push_back(dumps(gen.value(), i % 3));
  seeds.push_back(
      "(dp0\nVheaders\np1\nccopy_reg\n_reconstructor\np2\n(cswift.common."
      "header_key_dict\nHeaderKeyDict\np3\nc__builtin__\ndict\np4\n(dp5\nVX-Size\np8\n"
      "V5\np9\nstp10\nRp11\ns.");
  seeds.push_back("S'caf\\xc3\\xa9'\n.");

  std::mt19937 rng(12345);
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  static const char kInteresting[] =
      "(.)]}NIJKLMFGSTUVXabcdeghjlpqrstu0128\x80\x85\x86\x87\x88"
      "\x8a\x8b\x8c\x8d\x8e\x93\x94\x95\xff\n'\\";
  int loaded = 0, failed = 0;
  for (int i = 0; i < 30000; ++i) {
    std::string p = seeds[pick(seeds.size())];
    for (size_t m = 1 + pick(4); m > 0 && !p.empty(); --m) {
      const size_t at = pick(p.size());
      switch (pick(7)) {
        case 0:
          p[at] = static_cast<char>(rng());
          break;
        case 1:
          p[at] = kInteresting[pick(sizeof kInteresting - 1)];
          break;
        case 2:
          p.insert(p.begin() + static_cast<ptrdiff_t>(at), static_cast<char>(rng()));
          break;
        case 3:
          p.erase(at, 1 + pick(4));
          break;
        case 4:
          p.insert(at, p.substr(pick(p.size()), pick(16)));
          break;
        case 5:
          p[at] ^= static_cast<char>(1 << pick(8));
          break;
        default:  // a huge or negative length somewhere
          p.insert(at, pick(2) ? "\xff\xff\xff\x7f"s : "\x00\x00\x00\x80"s);
      }
    }
    const Result<Value> r = loads(p);
    if (!r.ok()) {
      CHECK(r.status().code() == Status::Code::kCorruption);
      ++failed;
      continue;
    }
    ++loaded;
    for (int proto = 0; proto <= 2; ++proto) {
      const Result<Value> again = loads(dumps(*r, proto));
      REQUIRE(again.ok());
      if (proto > 0) CHECK(canonical(*again) == canonical(*r));
    }
  }
  MESSAGE("mutated pickles: ", loaded, " loaded, ", failed, " rejected");
  CHECK(loaded > 1000);
  CHECK(failed > 1000);
}

// ------------------------------------------------------------------------------ metadata

using Pairs = std::vector<std::pair<std::string, std::string>>;

TEST_CASE("pickle object metadata: the Python 3 Swift encoding") {
  const Pairs wire = {{"name", "/AUTH_\xc3\xa9/c/o\xf0\x9f\x98\x80"},
                      {"X-Timestamp", "1402464677.04188"},
                      {"Content-Length", "5"},
                      {"X-Object-Meta-Caf\xc3\xa9", "\xc3\xa9t\xc3\xa9"},
                      {"X-Object-Meta-Raw", "\x80\xff"},
                      {"X-Object-Meta-Empty", ""}};
  const std::string p = encode_object_metadata(wire);
  // Stored as Swift does: bytes of utf8(WSGI string), via _codecs.encode; name as real UTF-8.
  CHECK(p.starts_with("\x80\x02}q\x00(c_codecs\nencode\n"s));
  const Value stored = load_ok(p);
  CHECK(*stored.find("name") == B("/AUTH_\xc3\xa9/c/o\xf0\x9f\x98\x80"));
  CHECK(*stored.find("X-Object-Meta-Raw") == B("\xc2\x80\xc3\xbf"));
  CHECK(*stored.find("X-Object-Meta-Caf\xc3\x83\xc2\xa9") ==
        B("\xc3\x83\xc2\xa9t\xc3\x83\xc2\xa9"));
  CHECK(*stored.find("X-Object-Meta-Empty") == B(""));
  const auto back = decode_object_metadata(p);
  REQUIRE(back.ok());
  CHECK(*back == wire);
  CHECK(encode_object_metadata({}) == "\x80\x02}q\x00."s);
  CHECK(decode_object_metadata(encode_object_metadata({}))->empty());
}

TEST_CASE("pickle object metadata: random wire bytes round trip") {
  std::mt19937 rng(99);
  auto bytes = [&](size_t max) {
    std::string s(std::uniform_int_distribution<size_t>(0, max)(rng), '\0');
    for (char& c : s) c = static_cast<char>(rng());
    return s;
  };
  for (int i = 0; i < 500; ++i) {
    Pairs wire = {{"name", "/a/c/" + bytes(20)}};
    for (int n = static_cast<int>(rng() % 8); n > 0; --n) {
      wire.emplace_back("X-Object-Meta-" + std::to_string(n) + bytes(5), bytes(40));
    }
    const auto back = decode_object_metadata(encode_object_metadata(wire));
    REQUIRE(back.ok());
    CHECK(*back == wire);
  }
}

TEST_CASE("pickle object metadata: Python 2 pickles, str items, numbers and oddities") {
  // Python 2: plain strings, stored bytes are wire bytes (no latin-1/UTF-8 round).
  const std::string py2 =
      "\x80\x02}q\x01(U\x04nameq\x02U\x07/a/c/\xc3\xa9q\x03U\x10X-Object-Meta-\xc3\xa9q\x04U\x02"
      "\xc3\xa9q\x05u."s;
  CHECK(*decode_object_metadata(py2) ==
        Pairs{{"name", "/a/c/\xc3\xa9"}, {"X-Object-Meta-\xc3\xa9", "\xc3\xa9"}});
  // str items (not written by Swift): WSGI strings, and real text for name.
  const Value strs = Value::dict({{S("name"), S("/a/c/\xc3\xa9\xed\xb2\x80")},
                                  {S("X-Object-Meta-\xc3\x83\xc2\xa9"), S("\xc3\x83\xc2\xa9")},
                                  {S("X-Object-Meta-Wide"), S("\xe4\xb8\xad")},
                                  {S("Content-Length"), I(5)},
                                  {S("X-Float"), Value::floating(0.5)},
                                  {S("X-Bool"), Value::boolean(true)}});
  CHECK(*decode_object_metadata(dumps(strs, 2)) ==
        Pairs{{"name", "/a/c/\xc3\xa9\x80"},  // U+DC80 is surrogateescape for byte 0x80
              {"X-Object-Meta-\xc3\xa9", "\xc3\xa9"},
              {"X-Object-Meta-Wide", "\xe4\xb8\xad"},  // not a WSGI string: its UTF-8
              {"Content-Length", "5"},
              {"X-Float", "0.5"},
              {"X-Bool", "True"}});
  // Python 3 bytes that do not decode to a WSGI string are returned as stored.
  const Value odd = Value::dict({{B("X-Wide"), B("\xe4\xb8\xad")}, {B("X-Bad"), B("\xff\xfe")}});
  CHECK(*decode_object_metadata(dumps(odd, 2)) ==
        Pairs{{"X-Wide", "\xe4\xb8\xad"}, {"X-Bad", "\xff\xfe"}});
  // Only the exact key `name` is real UTF-8.
  const Value names = Value::dict({{B("Name"), B("\xc3\xa9")}, {B("name"), B("\xc3\xa9")}});
  CHECK(*decode_object_metadata(dumps(names, 2)) == Pairs{{"Name", "\xe9"}, {"name", "\xc3\xa9"}});

  auto fails = [](const Value& v, std::string_view what) {
    const auto r = decode_object_metadata(dumps(v, 2));
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == Status::Code::kCorruption);
    CHECK_MESSAGE(r.status().message().find(what) != std::string::npos, r.status().message());
  };
  fails(Value::list(), "not a dict");
  fails(Value::dict({{S("a"), Value::none()}}), "not a string");
  fails(Value::dict({{S("a"), Value::list()}}), "not a string");
  fails(Value::dict({{Value::tuple(), S("a")}}), "not a string");
  CHECK_FALSE(decode_object_metadata("\x80\x02}q\x00("s).ok());
}

TEST_CASE("pickle object metadata: the plain reader takes the usual pickles, others fall through") {
  using internal::decode_general_object_metadata;
  using internal::decode_plain_object_metadata;
  // Read alike by both: what Apus (and Python 3 Swift) writes for ASCII pairs, with b'' as
  // bytes() and the one-character values Python shares through its memo; one pair (SETITEM);
  // none.
  const Pairs usual = {
      {"name", "/AUTH_test/c/o"},     {"X-Timestamp", "1402464677.04188"},
      {"Content-Length", "1"},        {"X-Object-Meta-A", "1"},
      {"X-Object-Meta-Empty", ""},    {"X-Object-Meta-Also-Empty", ""},
      {"Content-Type", "text/plain"}, {"ETag", "d41d8cd98f00b204e9800998ecf8427e"}};
  for (const Pairs& pairs : {usual, Pairs{{"name", "/a/c/o"}}, Pairs{}}) {
    const std::string p = encode_object_metadata(pairs);
    const auto plain = decode_plain_object_metadata(p);
    REQUIRE(plain.has_value());
    CHECK(*plain == pairs);
    CHECK(*decode_general_object_metadata(p) == pairs);
    CHECK(*decode_object_metadata(p) == pairs);
    // No prefix of it is a pickle.
    for (size_t n = 0; n < p.size(); ++n) CHECK_FALSE(decode_plain_object_metadata(p.substr(0, n)));
  }
  CHECK(encode_object_metadata(usual).find("h\x01") != std::string::npos);  // memo reused
  // Python 2 Swift's plain strings, and str items.
  const std::string py2 = "\x80\x02}q\x01(U\x04nameq\x02U\x06/a/c/oq\x03U\x01Xq\x04U\x00q\x05u."s;
  CHECK(decode_plain_object_metadata(py2) == Pairs{{"name", "/a/c/o"}, {"X", ""}});
  const Value strs = Value::dict({{S("name"), S("/a/c/o")}, {S("X-Object-Meta-S"), S("s")}});
  CHECK(decode_plain_object_metadata(dumps(strs, 2)) ==
        Pairs{{"name", "/a/c/o"}, {"X-Object-Meta-S", "s"}});

  // Left to the general reader, which reads each (or refuses it) by the rules above.
  auto falls_through = [](const std::string& p) {
    CHECK_FALSE(decode_plain_object_metadata(p).has_value());
    const auto general = decode_general_object_metadata(p);
    const auto either = decode_object_metadata(p);
    REQUIRE(general.ok() == either.ok());
    if (general.ok()) CHECK(*general == *either);
  };
  falls_through(encode_object_metadata({{"name", "/a/c/\xc3\xa9"}}));          // not ASCII
  falls_through(encode_object_metadata({{"X-Object-Meta-\xe9", "v"}}));        // not ASCII
  falls_through(dumps(Value::dict({{B("a"), B("1")}, {B("a"), B("2")}}), 2));  // key twice
  falls_through(dumps(Value::dict({{B("a"), B("1")}, {S("a"), B("2")}}), 2));  // bytes and str
  falls_through(dumps(Value::dict({{B("Content-Length"), I(5)}}), 2));         // a number
  falls_through(dumps(Value::dict({{B("a"), Value::none()}}), 2));             // not a string
  falls_through(dumps(Value::list({B("a")}), 2));                              // not a dict
  falls_through(dumps(Value::dict({{B("a"), B("1")}}), 0));                    // protocol 0
  Pairs many;
  for (int i = 0; i < 65; ++i) many.emplace_back("X-Object-Meta-" + std::to_string(i), "v");
  falls_through(encode_object_metadata(many));
  many.pop_back();
  CHECK(decode_plain_object_metadata(encode_object_metadata(many)) == many);
  // A memo numbered out of order (Python never writes one) and a FRAME.
  std::string reordered = encode_object_metadata({{"a", "b"}});
  REQUIRE(reordered.substr(3, 2) == "q\x00"s);
  reordered[4] = '\x02';
  falls_through(reordered);
  falls_through("\x80\x04\x95\x03\x00\x00\x00\x00\x00\x00\x00}\x94."s);
}

// ------------------------------------------------------------------------------ vectors

TEST_CASE("pickle vectors: Python's pickles load to Python's values") {
  int checked = 0;
  for (const auto& kind : {"pkl_dump", "pkl_load"}) {
    for (const auto& f : testing::swift_vectors(kind)) {
      const bool dump = std::string_view(kind) == "pkl_dump";
      const std::string data = testing::unhex(f[dump ? 2 : 1]);
      const std::string& expected = f[dump ? 3 : 2];
      INFO(kind, " ", f[0], " ", short_hex(data));
      const Result<Value> v = loads(data);
      REQUIRE_MESSAGE(v.ok(), v.status().to_string());
      CHECK(canonical(*v) == expected);
      ++checked;
    }
  }
  MESSAGE(checked, " Python pickles loaded");
  CHECK(checked > 2000);
}

TEST_CASE("pickle vectors: dumps() reproduces Python's bytes exactly") {
  int checked = 0, identical = 0, protocol0 = 0;
  for (const auto& f : testing::swift_vectors("pkl_dump")) {
    const int proto = std::stoi(f[1]);
    const std::string data = testing::unhex(f[2]);
    INFO(f[0], " protocol ", proto, " python ", short_hex(data));
    const Result<Value> v = loads(data);
    REQUIRE(v.ok());
    const std::string ours = dumps(*v, proto);
    CHECK_MESSAGE(ours == data, "apus   ", short_hex(ours));
    ++checked;
    identical += ours == data;
    protocol0 += proto == 0 && ours == data;
  }
  MESSAGE(identical, " of ", checked, " dumps byte-identical (", protocol0, " at protocol 0)");
  CHECK(checked > 1500);
}

TEST_CASE("pickle vectors: object metadata written by Swift") {
  int checked = 0, identical = 0, plain_read = 0;
  for (const auto& f : testing::swift_vectors("pkl_meta")) {
    const std::string data = testing::unhex(f[2]);
    const auto expected = testing::pairs_from_hex(f[3]);
    INFO(f[0], " ", f[1], " ", short_hex(data));
    REQUIRE(expected.has_value());
    const auto decoded = decode_object_metadata(data);
    REQUIRE_MESSAGE(decoded.ok(), decoded.status().to_string());
    CHECK(*decoded == *expected);
    // The plain reader reads it alike, or leaves it to the general one.
    if (const auto plain = internal::decode_plain_object_metadata(data)) {
      CHECK(*plain == *expected);
      ++plain_read;
    }
    if (f[1] == "py3") {
      // What Swift writes for this metadata, byte for byte.
      CHECK(encode_object_metadata(*expected) == data);
      ++identical;
    }
    ++checked;
  }
  MESSAGE(checked, " metadata pickles decoded, ", identical, " re-encoded byte for byte, ",
          plain_read, " by the plain reader");
  CHECK(identical >= 40);
  CHECK(plain_read >= 20);
  CHECK(checked > identical);
}

}  // namespace
}  // namespace apus::common::pickle

TEST_CASE("issue 12: dict keys of deeply nested tuples are ordered in linear time") {
  // {(T, 'a'): None, (T, 'b'): None} where T is ('x',) nested 64 levels: ordering the keys
  // compares the two equal Ts once per level; asking both a<b and b<a at every level (the old
  // order) was 2^64 steps, a hang the pickle fuzzer found
  // (tests/fuzz/corpus/pickle/nested_tuple_keys_timeout).
  auto key = [](char last) {
    std::string k = std::string("X\x01\x00\x00\x00x", 6) + std::string(64, '\x85');  // TUPLE1
    k += std::string("X\x01\x00\x00\x00", 5) + last + "\x86";                         // TUPLE2
    return k + "N";  // the value: None
  };
  std::string data = std::string("\x80\x02}(", 4) + key('a') + key('b') + "u.";
  auto v = apus::common::pickle::loads(data);
  REQUIRE(v.ok());
  CHECK(v->as_dict().size() == 2);
}
