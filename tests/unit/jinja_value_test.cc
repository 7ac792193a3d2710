// Template values: Python str()/repr(), truthiness, ==, ordering, JSON and
// Unicode case mapping, checked against Python 3.11 + jinja2 3.1 (transformers settings:
// ImmutableSandboxedEnvironment). Each case names the Jinja
// expression that produced its expected value; `[expr] (repr)` means the value
// was read as Python's repr() of the element (print of a one-item list).
// Where jinja2 yields a generator, the oracle expression adds |list.
#include "jinja_value_test_util.h"

using namespace corvid::jinja;          // NOLINT: test shorthand
using namespace corvid::jinja::testing;  // NOLINT


TEST(JinjaValue, FloatRepr) {
  // {{ 1.0 }}
  EXPECT_EQ((Fl(1.0)).str(), "1.0");
  // {{ 0.1 }}
  EXPECT_EQ((Fl(0.1)).str(), "0.1");
  // {{ 1e20 }}
  EXPECT_EQ((Fl(1e20)).str(), "1e+20");
  // {{ 1e16 }}
  EXPECT_EQ((Fl(1e16)).str(), "1e+16");
  // {{ 1e15 }}
  EXPECT_EQ((Fl(1e15)).str(), "1000000000000000.0");
  // {{ 123456789012345.6 }}
  EXPECT_EQ((Fl(123456789012345.6)).str(), "123456789012345.6");
  // {{ 0.0001 }}
  EXPECT_EQ((Fl(0.0001)).str(), "0.0001");
  // {{ 0.00001 }}
  EXPECT_EQ((Fl(0.00001)).str(), "1e-05");
  // {{ -0.0 }}
  EXPECT_EQ((Fl(-0.0)).str(), "-0.0");
  // {{ 1e300 * 1e300 }}
  EXPECT_EQ((Fl(1e300 * 1e300)).str(), "inf");
  // {{ -1e300 * 1e300 }}
  EXPECT_EQ((Fl(-1e300 * 1e300)).str(), "-inf");
  // {{ 1 / 3 }}
  EXPECT_EQ((Fl(1.0 / 3.0)).str(), "0.3333333333333333");
  // {{ 2.5e-10 }}
  EXPECT_EQ((Fl(2.5e-10)).str(), "2.5e-10");
  // {{ 1.7976931348623157e308 }}
  EXPECT_EQ((Fl(1.7976931348623157e308)).str(), "1.7976931348623157e+308");
  // {{ 5e-324 }}
  EXPECT_EQ((Fl(5e-324)).str(), "5e-324");
  // {{ 100.0 }}
  EXPECT_EQ((Fl(100.0)).str(), "100.0");
  // {{ 1e22 }}
  EXPECT_EQ((Fl(1e22)).str(), "1e+22");
  // {{ -1.5e-7 }}
  EXPECT_EQ((Fl(-1.5e-7)).str(), "-1.5e-07");
  // {{ 0.1 + 0.2 }}
  EXPECT_EQ((Fl(0.1 + 0.2)).str(), "0.30000000000000004");
  // {{ 1234.5 }}
  EXPECT_EQ((Fl(1234.5)).str(), "1234.5");
}

TEST(JinjaValue, StrAndRepr) {
  auto ns = std::make_shared<Object>();
  ns->is_namespace = true;
  ns->set("a", I(1));
  ns->set("b", S("x"));
  // {{ none }}
  EXPECT_EQ((N()).str(), "None");
  // {{ true }}
  EXPECT_EQ((B(true)).str(), "True");
  // {{ false }}
  EXPECT_EQ((B(false)).str(), "False");
  // {{ -42 }}
  EXPECT_EQ((I(-42)).str(), "-42");
  // {{ 'text' }}
  EXPECT_EQ((S("text")).str(), "text");
  // {{ x }}
  EXPECT_EQ((U()).str(), "");
  // {{ [x] }}
  EXPECT_EQ((L({U()})).str(), "[Undefined]");
  // {{ [1, 2.0, 'a', none, true, [], {}] }}
  EXPECT_EQ((L({I(1), Fl(2.0), S("a"), N(), B(true), L({}), D({})})).str(), "[1, 2.0, 'a', None, True, [], {}]");
  // {{ {'k': [1, {'n': none}], 'é': 'ü'} }}
  EXPECT_EQ((D({{"k", L({I(1), D({{"n", N()}})})}, {"é", S("ü")}})).str(), "{'k': [1, {'n': None}], '\xc3""\xa9""': '\xc3""\xbc""'}");
  // {{ ["it's"] }}
  EXPECT_EQ((L({S("it's")})).str(), "[\"it's\"]");
  // {{ ['say "hi"'] }}
  EXPECT_EQ((L({S("say \"hi\"")})).str(), "['say \"hi\"']");
  // {{ ['both \' and "'] }}
  EXPECT_EQ((L({S("both ' and \"")})).str(), "['both \\' and \"']");
  // {{ ['back\\slash\ttab\nnl\rcr'] }}
  EXPECT_EQ((L({S("back\\slash\ttab\nnl\rcr")})).str(), "['back\\\\slash\\ttab\\nnl\\rcr']");
  // {{ ['\x00\x1f\x7f\x85\xa0\xad\u2028\u200b\ue000\U0001F600é中'] }}
  EXPECT_EQ((L({S(std::string("\x00", 1) + "\x1f\x7f\u0085\u00a0\u00ad\u2028\u200b\ue000\U0001F600é中")})).str(), "['\\x00\\x1f\\x7f\\x85\\xa0\\xad\\u2028\\u200b\\ue000\xf0""\x9f""\x98""\x80""\xc3""\xa9""\xe4""\xb8""\xad""']");
  // {{ namespace(a=1, b='x') }}
  EXPECT_EQ((Value::object(ns)).str(), "<Namespace {'a': 1, 'b': 'x'}>");
  // {{ (1,) }}
  EXPECT_EQ((Value::tuple({I(1)})).str(), "(1,)");
  // {{ () }}
  EXPECT_EQ((Value::tuple({})).str(), "()");
  // {{ [(1, 'a')] }}
  EXPECT_EQ((L({Value::tuple({I(1), S("a")})})).str(), "[(1, 'a')]");
}

TEST(JinjaValue, Truthiness) {
  auto ns = std::make_shared<Object>();
  ns->is_namespace = true;
  // {{ 'T' if '' else 'F' }}
  EXPECT_EQ((Value((S("")).truthy() ? "T" : "F")).str(), "F");
  // {{ 'T' if ' ' else 'F' }}
  EXPECT_EQ((Value((S(" ")).truthy() ? "T" : "F")).str(), "T");
  // {{ 'T' if [] else 'F' }}
  EXPECT_EQ((Value((L({})).truthy() ? "T" : "F")).str(), "F");
  // {{ 'T' if [0] else 'F' }}
  EXPECT_EQ((Value((L({I(0)})).truthy() ? "T" : "F")).str(), "T");
  // {{ 'T' if {} else 'F' }}
  EXPECT_EQ((Value((D({})).truthy() ? "T" : "F")).str(), "F");
  // {{ 'T' if {'a': 0} else 'F' }}
  EXPECT_EQ((Value((D({{"a", I(0)}})).truthy() ? "T" : "F")).str(), "T");
  // {{ 'T' if 0 else 'F' }}
  EXPECT_EQ((Value((I(0)).truthy() ? "T" : "F")).str(), "F");
  // {{ 'T' if -1 else 'F' }}
  EXPECT_EQ((Value((I(-1)).truthy() ? "T" : "F")).str(), "T");
  // {{ 'T' if 0.0 else 'F' }}
  EXPECT_EQ((Value((Fl(0.0)).truthy() ? "T" : "F")).str(), "F");
  // {{ 'T' if -0.0 else 'F' }}
  EXPECT_EQ((Value((Fl(-0.0)).truthy() ? "T" : "F")).str(), "F");
  // {{ 'T' if 0.5 else 'F' }}
  EXPECT_EQ((Value((Fl(0.5)).truthy() ? "T" : "F")).str(), "T");
  // {{ 'T' if none else 'F' }}
  EXPECT_EQ((Value((N()).truthy() ? "T" : "F")).str(), "F");
  // {{ 'T' if x else 'F' }}
  EXPECT_EQ((Value((U()).truthy() ? "T" : "F")).str(), "F");
  // {{ 'T' if false else 'F' }}
  EXPECT_EQ((Value((B(false)).truthy() ? "T" : "F")).str(), "F");
  // {{ 'T' if namespace() else 'F' }}
  EXPECT_EQ((Value((Value::object(ns)).truthy() ? "T" : "F")).str(), "T");
  // {{ 'T' if 'a'.upper else 'F' }}
  EXPECT_EQ((Value((get_attribute(S("a"), "upper")).truthy() ? "T" : "F")).str(), "T");
  // {{ 'T' if () else 'F' }}
  EXPECT_EQ((Value((Value::tuple({})).truthy() ? "T" : "F")).str(), "F");
}

TEST(JinjaValue, Equality) {
  // {{ 'T' if (1) == (1.0) else 'F' }}
  EXPECT_EQ((Value(I(1) == Fl(1.0) ? "T" : "F")).str(), "T");
  // {{ 'T' if (1) == (true) else 'F' }}
  EXPECT_EQ((Value(I(1) == B(true) ? "T" : "F")).str(), "T");
  // {{ 'T' if (0.0) == (false) else 'F' }}
  EXPECT_EQ((Value(Fl(0.0) == B(false) ? "T" : "F")).str(), "T");
  // {{ 'T' if ('1') == (1) else 'F' }}
  EXPECT_EQ((Value(S("1") == I(1) ? "T" : "F")).str(), "F");
  // {{ 'T' if ([1, 'a']) == ([1.0, 'a']) else 'F' }}
  EXPECT_EQ((Value(L({I(1), S("a")}) == L({Fl(1.0), S("a")}) ? "T" : "F")).str(), "T");
  // {{ 'T' if ([1]) == ([1, 2]) else 'F' }}
  EXPECT_EQ((Value(L({I(1)}) == L({I(1), I(2)}) ? "T" : "F")).str(), "F");
  // {{ 'T' if ({'a': 1, 'b': 2}) == ({'b': 2, 'a': 1.0}) else 'F' }}
  EXPECT_EQ((Value(D({{"a", I(1)}, {"b", I(2)}}) == D({{"b", I(2)}, {"a", Fl(1.0)}}) ? "T" : "F")).str(), "T");
  // {{ 'T' if ({'a': 1}) == ({'a': 2}) else 'F' }}
  EXPECT_EQ((Value(D({{"a", I(1)}}) == D({{"a", I(2)}}) ? "T" : "F")).str(), "F");
  // {{ 'T' if (none) == (none) else 'F' }}
  EXPECT_EQ((Value(N() == N() ? "T" : "F")).str(), "T");
  // {{ 'T' if (none) == (false) else 'F' }}
  EXPECT_EQ((Value(N() == B(false) ? "T" : "F")).str(), "F");
  // {{ 'T' if ('') == (none) else 'F' }}
  EXPECT_EQ((Value(S("") == N() ? "T" : "F")).str(), "F");
  // {{ 'T' if (x) == (y) else 'F' }}
  EXPECT_EQ((Value(U() == Value::undefined("y") ? "T" : "F")).str(), "T");
  // {{ 'T' if (x) == (none) else 'F' }}
  EXPECT_EQ((Value(U() == N() ? "T" : "F")).str(), "F");
  // {{ 'T' if (1e300 * 1e300 - 1e300 * 1e300) == (1e300 * 1e300 - 1e300 * 1e300) else 'F' }}
  EXPECT_EQ((Value(Fl(NAN) == Fl(NAN) ? "T" : "F")).str(), "F");
  // {{ 'T' if (9007199254740993) == (9007199254740992.0) else 'F' }}
  EXPECT_EQ((Value(I(9007199254740993) == Fl(9007199254740992.0) ? "T" : "F")).str(), "F");
  // {{ 'T' if ((1, 2)) == ([1, 2]) else 'F' }}
  EXPECT_EQ((Value(Value::tuple({I(1), I(2)}) == L({I(1), I(2)}) ? "T" : "F")).str(), "F");
  // {{ 'T' if ((1, 2)) == ((1.0, 2)) else 'F' }}
  EXPECT_EQ((Value(Value::tuple({I(1), I(2)}) == Value::tuple({Fl(1.0), I(2)}) ? "T" : "F")).str(), "T");
}

TEST(JinjaValue, Ordering) {
  // {{ 'T' if (1) < (1.5) else 'F' }}
  EXPECT_EQ((Value(Value::less(I(1), Fl(1.5)) ? "T" : "F")).str(), "T");
  // {{ 'T' if (9007199254740993) < (9007199254740992.0) else 'F' }}
  EXPECT_EQ((Value(Value::less(I(9007199254740993), Fl(9007199254740992.0)) ? "T" : "F")).str(), "F");
  // {{ 'T' if (9007199254740992.0) < (9007199254740993) else 'F' }}
  EXPECT_EQ((Value(Value::less(Fl(9007199254740992.0), I(9007199254740993)) ? "T" : "F")).str(), "T");
  // {{ 'T' if (-2) < (-1.5) else 'F' }}
  EXPECT_EQ((Value(Value::less(I(-2), Fl(-1.5)) ? "T" : "F")).str(), "T");
  // {{ 'T' if (-1.5) < (-1) else 'F' }}
  EXPECT_EQ((Value(Value::less(Fl(-1.5), I(-1)) ? "T" : "F")).str(), "T");
  // {{ 'T' if (true) < (2) else 'F' }}
  EXPECT_EQ((Value(Value::less(B(true), I(2)) ? "T" : "F")).str(), "T");
  // {{ 'T' if (2.5) < (2) else 'F' }}
  EXPECT_EQ((Value(Value::less(Fl(2.5), I(2)) ? "T" : "F")).str(), "F");
  // {{ 'T' if ('B') < ('a') else 'F' }}
  EXPECT_EQ((Value(Value::less(S("B"), S("a")) ? "T" : "F")).str(), "T");
  // {{ 'T' if ('é') < ('z') else 'F' }}
  EXPECT_EQ((Value(Value::less(S("é"), S("z")) ? "T" : "F")).str(), "F");
  // {{ 'T' if ('ab') < ('abc') else 'F' }}
  EXPECT_EQ((Value(Value::less(S("ab"), S("abc")) ? "T" : "F")).str(), "T");
  // {{ 'T' if ('\uffff') < ('\U0001F600') else 'F' }}
  EXPECT_EQ((Value(Value::less(S("\uffff"), S("\U0001F600")) ? "T" : "F")).str(), "T");
  // {{ 'T' if ([1, 'b']) < ([1, 'c']) else 'F' }}
  EXPECT_EQ((Value(Value::less(L({I(1), S("b")}), L({I(1), S("c")})) ? "T" : "F")).str(), "T");
  // {{ 'T' if ([1]) < ([1, 0]) else 'F' }}
  EXPECT_EQ((Value(Value::less(L({I(1)}), L({I(1), I(0)})) ? "T" : "F")).str(), "T");
  // {{ 'T' if ([none]) < ([none, 1]) else 'F' }}
  EXPECT_EQ((Value(Value::less(L({N()}), L({N(), I(1)})) ? "T" : "F")).str(), "T");
  // {{ ('a') < (1) }} raises
  expect_error([&] { (void)(Value::less(S("a"), I(1))); }, "'<' not supported between instances of 'str' and 'int'");
  // {{ (none) < (none) }} raises
  expect_error([&] { (void)(Value::less(N(), N())); }, "'<' not supported between instances of 'NoneType' and 'NoneType'");
  // {{ ({}) < ({}) }} raises
  expect_error([&] { (void)(Value::less(D({}), D({}))); }, "'<' not supported between instances of 'dict' and 'dict'");
  // {{ ([1]) < (['a']) }} raises
  expect_error([&] { (void)(Value::less(L({I(1)}), L({S("a")}))); }, "'<' not supported between instances of 'int' and 'str'");
  // {{ ([1]) < ((1,)) }} raises
  expect_error([&] { (void)(Value::less(L({I(1)}), Value::tuple({I(1)}))); }, "'<' not supported between instances of 'list' and 'tuple'");
}

TEST(JinjaValue, UnicodeCase) {
  // ['ÉCOLE Straße ΣΑΣ ὈΔΥΣΣΕΎΣ İI'.lower()] (repr)
  EXPECT_EQ((method(S("ÉCOLE Straße ΣΑΣ ὈΔΥΣΣΕΎΣ İI"), "lower")).repr(), "'\xc3""\xa9""cole stra\xc3""\x9f""e \xcf""\x83""\xce""\xb1""\xcf""\x82"" \xe1""\xbd""\x80""\xce""\xb4""\xcf""\x85""\xcf""\x83""\xcf""\x83""\xce""\xb5""\xcf""\x8d""\xcf""\x82"" i\xcc""\x87""i'");
  // ['straße ﬁ ǆ ŉ привет ἀι'.upper()] (repr)
  EXPECT_EQ((method(S("straße ﬁ ǆ ŉ привет ἀι"), "upper")).repr(), "'STRASSE FI \xc7""\x84"" \xca""\xbc""N \xd0""\x9f""\xd0""\xa0""\xd0""\x98""\xd0""\x92""\xd0""\x95""\xd0""\xa2"" \xe1""\xbc""\x88""\xce""\x99""'");
  // ['ǆemal ßtraße éCOLE ΣΑΣ x'.title()] (repr)
  EXPECT_EQ((method(S("ǆemal ßtraße éCOLE ΣΑΣ x"), "title")).repr(), "'\xc7""\x85""emal Sstra\xc3""\x9f""e \xc3""\x89""cole \xce""\xa3""\xce""\xb1""\xcf""\x82"" X'");
  // ['ǆEMAL'.capitalize()] (repr)
  EXPECT_EQ((method(S("ǆEMAL"), "capitalize")).repr(), "'\xc7""\x85""emal'");
  // ['ΌΣΟΣ'.capitalize()] (repr)
  EXPECT_EQ((method(S("ΌΣΟΣ"), "capitalize")).repr(), "'\xce""\x8c""\xcf""\x83""\xce""\xbf""\xcf""\x82""'");
  // ['δ ΣΑΣ'|title] (repr)
  EXPECT_EQ((filter("title", S("δ ΣΑΣ"))).repr(), "'\xce""\x94"" \xce""\xa3""\xce""\xb1""\xcf""\x82""'");
  // ['日本語 text'|upper] (repr)
  EXPECT_EQ((filter("upper", S("日本語 text"))).repr(), "'\xe6""\x97""\xa5""\xe6""\x9c""\xac""\xe8""\xaa""\x9e"" TEXT'");
  // ['😀éa'|length] (repr)
  EXPECT_EQ((filter("length", S("😀éa"))).repr(), "3");
  // ['😀éa'|reverse] (repr)
  EXPECT_EQ((filter("reverse", S("😀éa"))).repr(), "'a\xc3""\xa9""\xf0""\x9f""\x98""\x80""'");
  // ['😀éa'|center(7)] (repr)
  EXPECT_EQ((filter("center", S("😀éa"), {I(7)})).repr(), "'  \xf0""\x9f""\x98""\x80""\xc3""\xa9""a  '");
  // ['\u00a0x\u2003'.strip()] (repr)
  EXPECT_EQ((method(S("\u00a0x\u2003"), "strip")).repr(), "'x'");
  // ['a\u2028b\x85c'.splitlines()] (repr)
  EXPECT_EQ((method(S("a\u2028b\u0085c"), "splitlines")).repr(), "['a', 'b', 'c']");
  // ['١٢٣'.isdigit()] (repr)
  EXPECT_EQ((method(S("١٢٣"), "isdigit")).repr(), "True");
  // ['²'.isdigit()] (repr)
  EXPECT_EQ((method(S("²"), "isdigit")).repr(), "True");
  // ['½'.isdigit()] (repr)
  EXPECT_EQ((method(S("½"), "isdigit")).repr(), "False");
  // ['½'.isalnum()] (repr)
  EXPECT_EQ((method(S("½"), "isalnum")).repr(), "True");
  // ['ǅ'.isupper()] (repr)
  EXPECT_EQ((method(S("ǅ"), "isupper")).repr(), "False");
  // ['ᾈ'.islower()] (repr)
  EXPECT_EQ((method(S("ᾈ"), "islower")).repr(), "False");
  // ['ʰ'.islower()] (repr)
  EXPECT_EQ((method(S("ʰ"), "islower")).repr(), "True");
}
TEST(JinjaValue, FromJsonKeepsOrderAndNumberKinds) {
  const auto j = corvid::jinja::Json::parse(R"({"b":1,"a":[1.0,2,"x",null,true,{"c":-3}],"u":"\u00e9\ud83d\ude00"})");
  const Value v = Value::from_json(j);
  // repr(json.loads('{"b":1,"a":[1.0,2,"x",null,true,{"c":-3}],"u":"\u00e9\ud83d\ude00"}'))
  EXPECT_EQ(v.repr(), "{'b': 1, 'a': [1.0, 2, 'x', None, True, {'c': -3}], 'u': '\xc3\xa9\xf0\x9f\x98\x80'}");
  EXPECT_TRUE(v.as_object().find("b")->is_int());
  EXPECT_TRUE(v.as_object().find("a")->as_array()[0].is_float());
  // Back to JSON: ints stay ints, floats stay floats, key order is kept.
  EXPECT_EQ(v.to_json().dump(), j.dump());
  EXPECT_EQ(v.to_json().dump(), R"({"b":1,"a":[1.0,2,"x",null,true,{"c":-3}],"u":"é😀"})");
  // Undefined becomes null; a function is refused.
  EXPECT_TRUE(U().to_json().is_null());
  EXPECT_THROW(get_attribute(S("a"), "upper").to_json(), corvid::Error);
  // A uint64 beyond int64 becomes the nearest float (Python would keep the int).
  EXPECT_TRUE(Value::from_json(corvid::jinja::Json::parse("18446744073709551615")).is_float());
}

TEST(JinjaValue, UndefinedMessages) {
  // {{ x.y }} -> UndefinedError: 'x' is undefined
  EXPECT_EQ(Value::undefined("x").undefined_message(), "'x' is undefined");
  // {{ {}.a.b }} -> 'dict object' has no attribute 'a'
  EXPECT_EQ(Value::undefined_member(D({}), S("a")).undefined_message(), "'dict object' has no attribute 'a'");
  // {{ [1][3].b }} -> list object has no element 3
  EXPECT_EQ(Value::undefined_member(L({I(1)}), I(3)).undefined_message(), "list object has no element 3");
  // {{ none.a.b }} -> 'None' has no attribute 'a'
  EXPECT_EQ(Value::undefined_member(N(), S("a")).undefined_message(), "'None' has no attribute 'a'");
  auto ns = std::make_shared<Object>();
  ns->is_namespace = true;
  // {% set ns = namespace() %}{{ ns.a.b }} -> 'jinja2.utils.Namespace object' has no attribute 'a'
  EXPECT_EQ(get_attribute(Value::object(ns), "a").undefined_message(),
            "'jinja2.utils.Namespace object' has no attribute 'a'");
  EXPECT_EQ(Value::undefined_with_message("No first item, sequence was empty.").undefined_message(),
            "No first item, sequence was empty.");
  // The undefined keeps the name it was looked up with.
  EXPECT_EQ(Value::undefined_member(D({}), S("k")).name(), "k");
}

TEST(JinjaValue, CallArgsAndObject) {
  const CallArgs args{{I(1), I(2)}, {{"b", I(3)}}};
  EXPECT_EQ(args.get("a", 0)->as_int(), 1);
  EXPECT_EQ(args.get("b", 1)->as_int(), 3);  // the keyword wins over the position
  EXPECT_EQ(args.get("c", 5), nullptr);
  Object object;
  object.set("k", I(1));
  object.set("j", I(2));
  object.set("k", I(3));  // replaced in place, order kept
  ASSERT_EQ(object.entries.size(), 2u);
  EXPECT_EQ(object.entries[0].first, "k");
  EXPECT_EQ(object.find("k")->as_int(), 3);
  EXPECT_EQ(object.find("z"), nullptr);
}

TEST(JinjaValue, InvalidUtf8PassesThrough) {
  // Bytes that are not UTF-8 count as one character each and come back unchanged.
  const std::string bad = "a\xff\xc3";
  EXPECT_EQ(filter("length", S(bad)).as_int(), 3);
  EXPECT_EQ(filter("upper", S(bad)).as_string(), "A\xff\xc3");
  EXPECT_EQ(get_slice(S(bad), I(1), U(), U()).as_string(), "\xff\xc3");
}

TEST(JinjaValue, NestingIsBounded) {
  // Lists nest up to kMaxNesting; deeper fails with an Error instead of exhausting the stack.
  Value v = L({});
  for (std::uint32_t i = 1; i < corvid::jinja::kMaxNesting; ++i) v = L({v});
  EXPECT_EQ(v.repr().size(), 2 * corvid::jinja::kMaxNesting);
  EXPECT_TRUE(v == v);
  EXPECT_THROW(L({v}), corvid::Error);
  EXPECT_THROW(D({{"k", v}}), corvid::Error);
  // JSON input is checked on the way down.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_THROW(Value::from_json(corvid::jinja::Json::parse(deep)), corvid::Error);
  // A namespace that contains itself cannot be printed (Python prints "{...}"), but it fails cleanly.
  auto ns = std::make_shared<Object>();
  ns->is_namespace = true;
  ns->set("self", Value::object(ns));
  EXPECT_THROW((void)Value::object(ns).str(), corvid::Error);
  ns->entries.clear();  // break the cycle
}

TEST(JinjaValue, HugeSizesFailCleanly) {
  expect_error([] { (void)method(S("a"), "center", {I(std::int64_t{1} << 40)}); },
               "width 1099511627776 is too large (at most 16777216)");
  EXPECT_THROW(method(S("{:99999999999999999999}"), "format", {S("a")}), corvid::Error);
  EXPECT_THROW(method(S("{99999999999999999999}"), "format", {S("a")}), corvid::Error);
  EXPECT_THROW(filter("format", S("%99999999999s"), {S("a")}), corvid::Error);
  EXPECT_THROW(filter("indent", S("a\nb"), {I(std::int64_t{1} << 40)}), corvid::Error);
  EXPECT_THROW(filter("slice", L({I(1)}), {I(std::int64_t{1} << 40)}), corvid::Error);
  // A step beyond any length picks the first item (Python: [1, 2, 3][::2**62] == [1]).
  EXPECT_EQ(get_slice(L({I(1), I(2), I(3)}), U(), U(), I(INT64_MAX)).repr(), "[1]");
  EXPECT_EQ(get_slice(L({I(1), I(2), I(3)}), U(), U(), I(INT64_MIN)).repr(), "[3]");
  // '{:.30f}'.format(0.1) needs more than a fixed buffer.
  EXPECT_EQ(method(S("{:.30f}"), "format", {Fl(0.1)}).str(), "0.100000000000000005551115123126");
  // '%c' % 233 / '%c' % 'é'
  EXPECT_EQ(filter("format", S("%c%c"), {I(233), S("é")}).str(), "éé");
}
