// jinja2's filters, tests, str/list/dict methods and member access, checked
// against Python jinja2 3.1 with transformers' settings (ImmutableSandboxedEnvironment,
// tojson = json.dumps(ensure_ascii=False, ...)). Each case names the Jinja
// expression that produced its expected value; `[expr] (repr)` means the value
// was read as Python's repr() of the element (print of a one-item list).
// Where jinja2 yields a generator, the oracle expression adds |list.
#include "jinja_value_test_util.h"

using namespace corvid::jinja;          // NOLINT: test shorthand
using namespace corvid::jinja::testing;  // NOLINT


TEST(JinjaBuiltinsFilters, StringFilters) {
  // ['  hi  '|trim] (repr)
  EXPECT_EQ((filter("trim", S("  hi  "))).repr(), "'hi'");
  // ['xxhixx'|trim('x')] (repr)
  EXPECT_EQ((filter("trim", S("xxhixx"), {S("x")})).repr(), "'hi'");
  // ['\u3000hi\n'|trim] (repr)
  EXPECT_EQ((filter("trim", S("\u3000hi\n"))).repr(), "'hi'");
  // ['hello World'|upper] (repr)
  EXPECT_EQ((filter("upper", S("hello World"))).repr(), "'HELLO WORLD'");
  // ['ÉCOLE Straße ΣΑΣ'|lower] (repr)
  EXPECT_EQ((filter("lower", S("ÉCOLE Straße ΣΑΣ"))).repr(), "'\xc3""\xa9""cole stra\xc3""\x9f""e \xcf""\x83""\xce""\xb1""\xcf""\x82""'");
  // ['straße éa'|upper] (repr)
  EXPECT_EQ((filter("upper", S("straße éa"))).repr(), "'STRASSE \xc3""\x89""A'");
  // ['привет'|upper] (repr)
  EXPECT_EQ((filter("upper", S("привет"))).repr(), "'\xd0""\x9f""\xd0""\xa0""\xd0""\x98""\xd0""\x92""\xd0""\x95""\xd0""\xa2""'");
  // ['hELLO wORLD'|capitalize] (repr)
  EXPECT_EQ((filter("capitalize", S("hELLO wORLD"))).repr(), "'Hello world'");
  // ['hello-world (foo) [bar] x_y o\'neil'|title] (repr)
  EXPECT_EQ((filter("title", S("hello-world (foo) [bar] x_y o'neil"))).repr(), "\"Hello-World (Foo) [Bar] X_y O'neil\"");
  // ['abc'|center(9)] (repr)
  EXPECT_EQ((filter("center", S("abc"), {I(9)})).repr(), "'   abc   '");
  // ['abc'|center(8)] (repr)
  EXPECT_EQ((filter("center", S("abc"), {I(8)})).repr(), "'  abc   '");
  // ['ab'|center(7)] (repr)
  EXPECT_EQ((filter("center", S("ab"), {I(7)})).repr(), "'   ab  '");
  // ['é'|center(4)] (repr)
  EXPECT_EQ((filter("center", S("é"), {I(4)})).repr(), "' \xc3""\xa9""  '");
  // ['a-b-c-d'|replace('-', '+')] (repr)
  EXPECT_EQ((filter("replace", S("a-b-c-d"), {S("-"), S("+")})).repr(), "'a+b+c+d'");
  // ['a-b-c-d'|replace('-', '+', 2)] (repr)
  EXPECT_EQ((filter("replace", S("a-b-c-d"), {S("-"), S("+"), I(2)})).repr(), "'a+b+c-d'");
  // ['ab'|replace('', '.')] (repr)
  EXPECT_EQ((filter("replace", S("ab"), {S(""), S(".")})).repr(), "'.a.b.'");
  // [42|replace('2', '3')] (repr)
  EXPECT_EQ((filter("replace", I(42), {S("2"), S("3")})).repr(), "'43'");
  // ['a<b>&"c\''|escape] (repr)
  EXPECT_EQ((filter("escape", S("a<b>&\"c'"))).repr(), "Markup('a&lt;b&gt;&amp;&#34;c&#39;')");
  // [none|e] (repr)
  EXPECT_EQ((filter("e", N())).repr(), "Markup('None')");
  // ['one two  three'|wordcount] (repr)
  EXPECT_EQ((filter("wordcount", S("one two  three"))).repr(), "3");
  // ['it\'s a_b, c3!'|wordcount] (repr)
  EXPECT_EQ((filter("wordcount", S("it's a_b, c3!"))).repr(), "4");
  // ['foo bar baz qux'|truncate(9)] (repr)
  EXPECT_EQ((filter("truncate", S("foo bar baz qux"), {I(9)})).repr(), "'foo...'");
  // ['foo bar baz qux'|truncate(9, true)] (repr)
  EXPECT_EQ((filter("truncate", S("foo bar baz qux"), {I(9), B(true)})).repr(), "'foo ba...'");
  // ['foo bar baz qux'|truncate(11, leeway=0, end='~')] (repr)
  EXPECT_EQ((filter("truncate", S("foo bar baz qux"), {I(11)}, {{"leeway", I(0)}, {"end", S("~")}})).repr(), "'foo bar~'");
  // ['foo bar baz'|truncate(8)] (repr)
  EXPECT_EQ((filter("truncate", S("foo bar baz"), {I(8)})).repr(), "'foo bar baz'");
  // {{ 'x'|truncate(2) }} raises
  expect_error([&] { (void)(filter("truncate", S("x"), {I(2)})); }, "expected length >= 3, got 2");
  // {{ 'abcdefgh'|truncate(2, leeway=0) }} raises
  expect_error([&] { (void)(filter("truncate", S("abcdefgh"), {I(2)}, {{"leeway", I(0)}})); }, "expected length >= 3, got 2");
  // ['a\nb\n\nc'|indent] (repr)
  EXPECT_EQ((filter("indent", S("a\nb\n\nc"))).repr(), "'a\\n    b\\n\\n    c'");
  // ['a\nb\n\nc'|indent(2, true)] (repr)
  EXPECT_EQ((filter("indent", S("a\nb\n\nc"), {I(2), B(true)})).repr(), "'  a\\n  b\\n\\n  c'");
  // ['a\nb\n\nc\n'|indent(2, blank=true)] (repr)
  EXPECT_EQ((filter("indent", S("a\nb\n\nc\n"), {I(2)}, {{"blank", B(true)}})).repr(), "'a\\n  b\\n  \\n  c\\n  '");
  // ['a\nb'|indent('> ', first=true)] (repr)
  EXPECT_EQ((filter("indent", S("a\nb"), {S("> ")}, {{"first", B(true)}})).repr(), "'> a\\n> b'");
  // ['{\n'|indent(4, first=true)] (repr)
  EXPECT_EQ((filter("indent", S("{\n"), {I(4)}, {{"first", B(true)}})).repr(), "'    {\\n'");
  // ['a\r\nb'|indent(1)] (repr)
  EXPECT_EQ((filter("indent", S("a\r\nb"), {I(1)})).repr(), "'a\\n b'");
  // ['%s-%d-%.2f-%r'|format('a', 3, 2.5, 'q')] (repr)
  EXPECT_EQ((filter("format", S("%s-%d-%.2f-%r"), {S("a"), I(3), Fl(2.5), S("q")})).repr(), "\"a-3-2.50-'q'\"");
  // ['%(x)s=%(y)05d'|format(x='k', y=42)] (repr)
  EXPECT_EQ((filter("format", S("%(x)s=%(y)05d"), {}, {{"x", S("k")}, {"y", I(42)}})).repr(), "'k=00042'");
  // ['%-5s|%5s|%x|%%'|format('ab', 'cd', 255)] (repr)
  EXPECT_EQ((filter("format", S("%-5s|%5s|%x|%%"), {S("ab"), S("cd"), I(255)})).repr(), "'ab   |   cd|ff|%'");
  // ['%s'|format([1, 'a'])] (repr)
  EXPECT_EQ((filter("format", S("%s"), {L({I(1), S("a")})})).repr(), "\"[1, 'a']\"");
  // {{ '%s %s'|format(1) }} raises
  expect_error([&] { (void)(filter("format", S("%s %s"), {I(1)})); }, "not enough arguments for format string");
  // {{ '%s'|format(1, 2) }} raises
  expect_error([&] { (void)(filter("format", S("%s"), {I(1), I(2)})); }, "not all arguments converted during string formatting");
  // {{ '%d'|format('x') }} raises
  expect_error([&] { (void)(filter("format", S("%d"), {S("x")})); }, "%d format: a real number is required, not str");
  // {{ '%x'|format(2.5) }} raises
  expect_error([&] { (void)(filter("format", S("%x"), {Fl(2.5)})); }, "%x format: an integer is required, not float");
  // ['%d|%+d|%5.1f|%-4s|%c'|format(1e20, 3.9, 2.25, 'ab', 'é')] (repr)
  EXPECT_EQ((filter("format", S("%d|%+d|%5.1f|%-4s|%c"), {Fl(1e20), Fl(3.9), Fl(2.25), S("ab"), S("é")})).repr(), "'100000000000000000000|+3|  2.2|ab  |\xc3""\xa9""'");
  // {{ 5|indent }} raises
  expect_error([&] { (void)(filter("indent", I(5))); }, "unsupported operand type(s) for +=: 'int' and 'str'");
  // {{ ['a']|indent }} raises
  expect_error([&] { (void)(filter("indent", L({S("a")}))); }, "'list' object has no attribute 'splitlines'");
  // [['a', 'b']|truncate(5)] (repr)
  EXPECT_EQ((filter("truncate", L({S("a"), S("b")}), {I(5)})).repr(), "['a', 'b']");
  // ['٣'|float] (repr)
  EXPECT_EQ((filter("float", S("٣"))).repr(), "3.0");
  // ['٣٤'|int] (repr)
  EXPECT_EQ((filter("int", S("٣٤"))).repr(), "34");
  // ['<p>a  <b>b</b><!-- c --> &amp; d</p>'|striptags] (repr)
  EXPECT_EQ((filter("striptags", S("<p>a  <b>b</b><!-- c --> &amp; d</p>"))).repr(), "'a b & d'");
  // ['abc'|reverse] (repr)
  EXPECT_EQ((filter("reverse", S("abc"))).repr(), "'cba'");
  // ['héllo'|length] (repr)
  EXPECT_EQ((filter("length", S("héllo"))).repr(), "5");
  // ['héllo'|count] (repr)
  EXPECT_EQ((filter("count", S("héllo"))).repr(), "5");
  // ['ab'|list] (repr)
  EXPECT_EQ((filter("list", S("ab"))).repr(), "['a', 'b']");
  // ['ab'|first] (repr)
  EXPECT_EQ((filter("first", S("ab"))).repr(), "'a'");
  // ['ab'|last] (repr)
  EXPECT_EQ((filter("last", S("ab"))).repr(), "'b'");
  // ['x'|safe] (repr)
  EXPECT_EQ((filter("safe", S("x"))).repr(), "Markup('x')");
  // [[1, 'a']|string] (repr)
  EXPECT_EQ((filter("string", L({I(1), S("a")}))).repr(), "\"[1, 'a']\"");
  // [none|string] (repr)
  EXPECT_EQ((filter("string", N())).repr(), "'None'");
  // [{'a': [1, 2]}|pprint] (repr)
  EXPECT_EQ((filter("pprint", D({{"a", L({I(1), I(2)})}}))).repr(), "\"{'a': [1, 2]}\"");
  // [{'b': 1, 'a': [1, 2]}|pprint] (repr)
  EXPECT_EQ((filter("pprint", D({{"b", I(1)}, {"a", L({I(1), I(2)})}}))).repr(), "\"{'a': [1, 2], 'b': 1}\"");
  // [[{'name': 'get_weather', 'description': 'Get the current weather in a given location', 'parameters': {'type': 'object', 'properties': {'location': {'type': 'string'}, 'unit': {'type': 'string', 'enum': ['celsius', 'fahrenheit']}}}}]|pprint] (repr)
  EXPECT_EQ((filter("pprint", L({D({{"name", S("get_weather")}, {"description", S("Get the current weather in a given location")}, {"parameters", D({{"type", S("object")}, {"properties", D({{"location", D({{"type", S("string")}})}, {"unit", D({{"type", S("string")}, {"enum", L({S("celsius"), S("fahrenheit")})}})}})}})}})}))).repr(), "\"[{'description': 'Get the current weather in a given location',\\n  'name': 'get_weather',\\n  'parameters': {'properties': {'location': {'type': 'string'},\\n                                'unit': {'enum': ['celsius', 'fahrenheit'],\\n                                         'type': 'string'}},\\n                 'type': 'object'}}]\"");
  // [('word ' * 30)|pprint] (repr)
  EXPECT_EQ((filter("pprint", S([] { std::string s; for (int i = 0; i < 30; ++i) s += "word "; return s; }()))).repr(), "\"('word word word word word word word word word word word word word word word '\\n 'word word word word word word word word word word word word word word word ')\"");
  // [['line one\nline two ' ~ 'x' * 80, (1,), [(1, 2)] * 15]|pprint] (repr)
  EXPECT_EQ((filter("pprint", L({S("line one\nline two " + std::string(80, 'x')), Value::tuple({I(1)}), [] { std::vector<Value> v; for (int i = 0; i < 15; ++i) v.push_back(Value::tuple({I(1), I(2)})); return L(v); }()}))).repr(), "\"['line one\\\\n'\\n 'line two '\\n 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx',\\n (1,),\\n [(1, 2),\\n  (1, 2),\\n  (1, 2),\\n  (1, 2),\\n  (1, 2),\\n  (1, 2),\\n  (1, 2),\\n  (1, 2),\\n  (1, 2),\\n  (1, 2),\\n  (1, 2),\\n  (1, 2),\\n  (1, 2),\\n  (1, 2),\\n  (1, 2)]]\"");
}

TEST(JinjaBuiltinsFilters, NumberFilters) {
  auto ns = std::make_shared<Object>();
  ns->is_namespace = true;
  // [1|filesizeformat] (repr)
  EXPECT_EQ((filter("filesizeformat", I(1))).repr(), "'1 Byte'");
  // [999|filesizeformat] (repr)
  EXPECT_EQ((filter("filesizeformat", I(999))).repr(), "'999 Bytes'");
  // ['123456789'|filesizeformat] (repr)
  EXPECT_EQ((filter("filesizeformat", S("123456789"))).repr(), "'123.5 MB'");
  // [1536|filesizeformat(true)] (repr)
  EXPECT_EQ((filter("filesizeformat", I(1536), {B(true)})).repr(), "'1.5 KiB'");
  // {{ 'abc'|filesizeformat }} raises
  expect_error([&] { (void)(filter("filesizeformat", S("abc"))); }, "could not convert string to float: 'abc'");
  // {{ none|filesizeformat }} raises
  expect_error([&] { (void)(filter("filesizeformat", N())); }, "float() argument must be a string or a real number, not 'NoneType'");
  // [1e30|filesizeformat] (repr)
  EXPECT_EQ((filter("filesizeformat", Fl(1e30))).repr(), "'1000000.0 YB'");
  // [-3|abs] (repr)
  EXPECT_EQ((filter("abs", I(-3))).repr(), "3");
  // [-2.5|abs] (repr)
  EXPECT_EQ((filter("abs", Fl(-2.5))).repr(), "2.5");
  // {{ 'x'|abs }} raises
  expect_error([&] { (void)(filter("abs", S("x"))); }, "bad operand type for abs(): 'str'");
  // ['42'|int] (repr)
  EXPECT_EQ((filter("int", S("42"))).repr(), "42");
  // [' -7 '|int] (repr)
  EXPECT_EQ((filter("int", S(" -7 "))).repr(), "-7");
  // ['1_000'|int] (repr)
  EXPECT_EQ((filter("int", S("1_000"))).repr(), "1000");
  // ['3.9'|int] (repr)
  EXPECT_EQ((filter("int", S("3.9"))).repr(), "3");
  // ['abc'|int] (repr)
  EXPECT_EQ((filter("int", S("abc"))).repr(), "0");
  // ['abc'|int(5)] (repr)
  EXPECT_EQ((filter("int", S("abc"), {I(5)})).repr(), "5");
  // ['ff'|int(base=16)] (repr)
  EXPECT_EQ((filter("int", S("ff"), {}, {{"base", I(16)}})).repr(), "255");
  // ['0x1F'|int(0, 16)] (repr)
  EXPECT_EQ((filter("int", S("0x1F"), {I(0), I(16)})).repr(), "31");
  // ['0b101'|int(0, 0)] (repr)
  EXPECT_EQ((filter("int", S("0b101"), {I(0), I(0)})).repr(), "5");
  // [3.99|int] (repr)
  EXPECT_EQ((filter("int", Fl(3.99))).repr(), "3");
  // [-3.99|int] (repr)
  EXPECT_EQ((filter("int", Fl(-3.99))).repr(), "-3");
  // [true|int] (repr)
  EXPECT_EQ((filter("int", B(true))).repr(), "1");
  // [none|int] (repr)
  EXPECT_EQ((filter("int", N())).repr(), "0");
  // {{ x|int }} raises
  expect_error([&] { (void)(filter("int", U())); }, "'x' is undefined");
  // {{ x|float }} raises
  expect_error([&] { (void)(filter("float", U())); }, "'x' is undefined");
  // ['1e3'|int] (repr)
  EXPECT_EQ((filter("int", S("1e3"))).repr(), "1000");
  // ['2.5'|float] (repr)
  EXPECT_EQ((filter("float", S("2.5"))).repr(), "2.5");
  // [' 1e3 '|float] (repr)
  EXPECT_EQ((filter("float", S(" 1e3 "))).repr(), "1000.0");
  // ['-inf'|float] (repr)
  EXPECT_EQ((filter("float", S("-inf"))).repr(), "-inf");
  // ['x'|float] (repr)
  EXPECT_EQ((filter("float", S("x"))).repr(), "0.0");
  // ['x'|float(1.5)] (repr)
  EXPECT_EQ((filter("float", S("x"), {Fl(1.5)})).repr(), "1.5");
  // ['.5'|float] (repr)
  EXPECT_EQ((filter("float", S(".5"))).repr(), "0.5");
  // ['5.'|float] (repr)
  EXPECT_EQ((filter("float", S("5."))).repr(), "5.0");
  // ['.'|float] (repr)
  EXPECT_EQ((filter("float", S("."))).repr(), "0.0");
  // [3|float] (repr)
  EXPECT_EQ((filter("float", I(3))).repr(), "3.0");
  // [2.5|round] (repr)
  EXPECT_EQ((filter("round", Fl(2.5))).repr(), "2.0");
  // [3.5|round] (repr)
  EXPECT_EQ((filter("round", Fl(3.5))).repr(), "4.0");
  // [2.675|round(2)] (repr)
  EXPECT_EQ((filter("round", Fl(2.675), {I(2)})).repr(), "2.67");
  // [7|round] (repr)
  EXPECT_EQ((filter("round", I(7))).repr(), "7");
  // [1234.5678|round(-2)] (repr)
  EXPECT_EQ((filter("round", Fl(1234.5678), {I(-2)})).repr(), "1200.0");
  // [25|round(-1)] (repr)
  EXPECT_EQ((filter("round", I(25), {I(-1)})).repr(), "20");
  // [35|round(-1)] (repr)
  EXPECT_EQ((filter("round", I(35), {I(-1)})).repr(), "40");
  // [-25|round(-1)] (repr)
  EXPECT_EQ((filter("round", I(-25), {I(-1)})).repr(), "-20");
  // [-35|round(-1)] (repr)
  EXPECT_EQ((filter("round", I(-35), {I(-1)})).repr(), "-40");
  // [149|round(-2)] (repr)
  EXPECT_EQ((filter("round", I(149), {I(-2)})).repr(), "100");
  // [150|round(-2)] (repr)
  EXPECT_EQ((filter("round", I(150), {I(-2)})).repr(), "200");
  // [250|round(-2)] (repr)
  EXPECT_EQ((filter("round", I(250), {I(-2)})).repr(), "200");
  // [-251|round(-2)] (repr)
  EXPECT_EQ((filter("round", I(-251), {I(-2)})).repr(), "-300");
  // [7|round(-400)] (repr)
  EXPECT_EQ((filter("round", I(7), {I(-400)})).repr(), "0");
  // [-2.5|round(-400)] (repr)
  EXPECT_EQ((filter("round", Fl(-2.5), {I(-400)})).repr(), "-0.0");
  // {{ [[1.0], [[]]]|max }} raises
  expect_error([&] { (void)(filter("max", L({L({Fl(1.0)}), L({L({})})}))); }, "'>' not supported between instances of 'list' and 'float'");
  // [[[2, 'a'], [2, 'b']]|max] (repr)
  EXPECT_EQ((filter("max", L({L({I(2), S("a")}), L({I(2), S("b")})}))).repr(), "[2, 'b']");
  // [2.1|round(0, 'ceil')] (repr)
  EXPECT_EQ((filter("round", Fl(2.1), {I(0), S("ceil")})).repr(), "3.0");
  // [2.19|round(1, 'floor')] (repr)
  EXPECT_EQ((filter("round", Fl(2.19), {I(1), S("floor")})).repr(), "2.1");
  // [2|round(0, 'ceil')] (repr)
  EXPECT_EQ((filter("round", I(2), {I(0), S("ceil")})).repr(), "2.0");
  // [[1, 2.5, true]|sum] (repr)
  EXPECT_EQ((filter("sum", L({I(1), Fl(2.5), B(true)}))).repr(), "4.5");
  // [[1, 2]|sum(start=10)] (repr)
  EXPECT_EQ((filter("sum", L({I(1), I(2)}), {}, {{"start", I(10)}})).repr(), "13");
  // [[{'n': 1}, {'n': 4}]|sum(attribute='n')] (repr)
  EXPECT_EQ((filter("sum", L({D({{"n", I(1)}}), D({{"n", I(4)}})}), {}, {{"attribute", S("n")}})).repr(), "5");
  // {{ ['a']|sum }} raises
  expect_error([&] { (void)(filter("sum", L({S("a")}))); }, "unsupported operand type(s) for +: 'int' and 'str'");
  // [[3, 1, 2]|max] (repr)
  EXPECT_EQ((filter("max", L({I(3), I(1), I(2)}))).repr(), "3");
  // [[3, 1, 2]|min] (repr)
  EXPECT_EQ((filter("min", L({I(3), I(1), I(2)}))).repr(), "1");
  // [['b', 'A', 'c']|max] (repr)
  EXPECT_EQ((filter("max", L({S("b"), S("A"), S("c")}))).repr(), "'c'");
  // [['b', 'A', 'C']|max(case_sensitive=true)] (repr)
  EXPECT_EQ((filter("max", L({S("b"), S("A"), S("C")}), {}, {{"case_sensitive", B(true)}})).repr(), "'b'");
  // [[{'a': 2}, {'a': 5}]|max(attribute='a')] (repr)
  EXPECT_EQ((filter("max", L({D({{"a", I(2)}}), D({{"a", I(5)}})}), {}, {{"attribute", S("a")}})).repr(), "{'a': 5}");
  // {{ []|max is undefined }}
  EXPECT_TRUE((filter("max", L({}))).is_undefined());
  // {{ [1, 'a']|max }} raises
  expect_error([&] { (void)(filter("max", L({I(1), S("a")}))); }, "'>' not supported between instances of 'str' and 'int'");
}

TEST(JinjaBuiltinsFilters, SequenceFilters) {
  auto ns = std::make_shared<Object>();
  ns->is_namespace = true;
  // [[1, 2, 3]|length] (repr)
  EXPECT_EQ((filter("length", L({I(1), I(2), I(3)}))).repr(), "3");
  // [{'a': 1}|length] (repr)
  EXPECT_EQ((filter("length", D({{"a", I(1)}}))).repr(), "1");
  // [x|length] (repr)
  EXPECT_EQ((filter("length", U())).repr(), "0");
  // {{ 5|length }} raises
  expect_error([&] { (void)(filter("length", I(5))); }, "object of type 'int' has no len()");
  // [[1, 2]|first] (repr)
  EXPECT_EQ((filter("first", L({I(1), I(2)}))).repr(), "1");
  // [[1, 2]|last] (repr)
  EXPECT_EQ((filter("last", L({I(1), I(2)}))).repr(), "2");
  // [{'k': 1, 'j': 2}|first] (repr)
  EXPECT_EQ((filter("first", D({{"k", I(1)}, {"j", I(2)}}))).repr(), "'k'");
  // {{ []|first is undefined }}
  EXPECT_TRUE((filter("first", L({}))).is_undefined());
  // {{ x|first is undefined }}
  EXPECT_TRUE((filter("first", U())).is_undefined());
  // [[1, 'a', none]|join] (repr)
  EXPECT_EQ((filter("join", L({I(1), S("a"), N()}))).repr(), "'1aNone'");
  // [[1, 'a', none]|join(', ')] (repr)
  EXPECT_EQ((filter("join", L({I(1), S("a"), N()}), {S(", ")})).repr(), "'1, a, None'");
  // [[{'n': 'x'}, {'n': 'y'}]|join('|', attribute='n')] (repr)
  EXPECT_EQ((filter("join", L({D({{"n", S("x")}}), D({{"n", S("y")}})}), {S("|")}, {{"attribute", S("n")}})).repr(), "'x|y'");
  // [x|join(',')] (repr)
  EXPECT_EQ((filter("join", U(), {S(",")})).repr(), "''");
  // [{'a': 1, 'b': [2]}|list] (repr)
  EXPECT_EQ((filter("list", D({{"a", I(1)}, {"b", L({I(2)})}}))).repr(), "['a', 'b']");
  // [x|list] (repr)
  EXPECT_EQ((filter("list", U())).repr(), "[]");
  // {{ 1|list }} raises
  expect_error([&] { (void)(filter("list", I(1))); }, "'int' object is not iterable");
  // [{'a': 1, 'b': [2]}|items|list] (repr)
  EXPECT_EQ((filter("list", filter("items", D({{"a", I(1)}, {"b", L({I(2)})}})))).repr(), "[('a', 1), ('b', [2])]");
  // [x|items|list] (repr)
  EXPECT_EQ((filter("list", filter("items", U()))).repr(), "[]");
  // {{ [1]|items|list }} raises
  expect_error([&] { (void)(filter("list", filter("items", L({I(1)})))); }, "Can only get item pairs from a mapping.");
  // [[1, 2, 3]|reverse|list] (repr)
  EXPECT_EQ((filter("list", filter("reverse", L({I(1), I(2), I(3)})))).repr(), "[3, 2, 1]");
  // [['b', 'A', 'c', 'a']|sort] (repr)
  EXPECT_EQ((filter("sort", L({S("b"), S("A"), S("c"), S("a")}))).repr(), "['A', 'a', 'b', 'c']");
  // [['b', 'A', 'c', 'a']|sort(case_sensitive=true)] (repr)
  EXPECT_EQ((filter("sort", L({S("b"), S("A"), S("c"), S("a")}), {}, {{"case_sensitive", B(true)}})).repr(), "['A', 'a', 'b', 'c']");
  // [[3, 1.5, true, 2]|sort(reverse=true)] (repr)
  EXPECT_EQ((filter("sort", L({I(3), Fl(1.5), B(true), I(2)}), {}, {{"reverse", B(true)}})).repr(), "[3, 2, 1.5, True]");
  // [[{'t': 'b', 'i': 1}, {'t': 'a', 'i': 2}, {'t': 'b', 'i': 0}]|sort(attribute='t')] (repr)
  EXPECT_EQ((filter("sort", L({D({{"t", S("b")}, {"i", I(1)}}), D({{"t", S("a")}, {"i", I(2)}}), D({{"t", S("b")}, {"i", I(0)}})}), {}, {{"attribute", S("t")}})).repr(), "[{'t': 'a', 'i': 2}, {'t': 'b', 'i': 1}, {'t': 'b', 'i': 0}]");
  // [[{'t': 'b', 'i': 1}, {'t': 'a', 'i': 2}, {'t': 'b', 'i': 0}]|sort(attribute='t,i')] (repr)
  EXPECT_EQ((filter("sort", L({D({{"t", S("b")}, {"i", I(1)}}), D({{"t", S("a")}, {"i", I(2)}}), D({{"t", S("b")}, {"i", I(0)}})}), {}, {{"attribute", S("t,i")}})).repr(), "[{'t': 'a', 'i': 2}, {'t': 'b', 'i': 0}, {'t': 'b', 'i': 1}]");
  // [[[2, 'a'], [1, 'b'], [2, 'A']]|sort] (repr)
  EXPECT_EQ((filter("sort", L({L({I(2), S("a")}), L({I(1), S("b")}), L({I(2), S("A")})}))).repr(), "[[1, 'b'], [2, 'A'], [2, 'a']]");
  // {{ [{'b': 1}, none, {'x': 2}, [1]]|sort(reverse=true) }} raises
  expect_error([&] { (void)(filter("sort", L({D({{"b", I(1)}}), N(), D({{"x", I(2)}}), L({I(1)})}), {B(true)})); }, "'<' not supported between instances of 'dict' and 'list'");
  // {{ [3, 1, 'a', 2, none]|sort }} raises
  expect_error([&] { (void)(filter("sort", L({I(3), I(1), S("a"), I(2), N()}))); }, "'<' not supported between instances of 'str' and 'int'");
  // {{ [{'a': 1}, {'b': 2}]|sort(attribute='a') }} raises
  expect_error([&] { (void)(filter("sort", L({D({{"a", I(1)}}), D({{"b", I(2)}})}), {}, {{"attribute", S("a")}})); }, "'dict object' has no attribute 'a'");
  // {{ [{'a': 1}, {'b': 2}]|sum(attribute='a') }} raises
  expect_error([&] { (void)(filter("sum", L({D({{"a", I(1)}}), D({{"b", I(2)}})}), {}, {{"attribute", S("a")}})); }, "'dict object' has no attribute 'a'");
  // [[5, 3, 9, 1, 1, 7, 2, 8, 0, 4, 6]|sort] (repr)
  EXPECT_EQ((filter("sort", L({I(5), I(3), I(9), I(1), I(1), I(7), I(2), I(8), I(0), I(4), I(6)}))).repr(), "[0, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9]");
  // {{ 5|reverse }} raises
  expect_error([&] { (void)(filter("reverse", I(5))); }, "argument must be iterable");
  // {{ 5|last }} raises
  expect_error([&] { (void)(filter("last", I(5))); }, "'int' object is not reversible");
  // {{ [3, 'a']|sort }} raises
  expect_error([&] { (void)(filter("sort", L({I(3), S("a")}))); }, "'<' not supported between instances of 'str' and 'int'");
  // [[none, none]|sort] (repr)
  EXPECT_EQ((filter("sort", L({N(), N()}))).repr(), "[None, None]");
  // {{ [none, 1]|sort }} raises
  expect_error([&] { (void)(filter("sort", L({N(), I(1)}))); }, "'<' not supported between instances of 'int' and 'NoneType'");
  // [{'b': 1, 'A': 3, 'c': 2}|dictsort] (repr)
  EXPECT_EQ((filter("dictsort", D({{"b", I(1)}, {"A", I(3)}, {"c", I(2)}}))).repr(), "[('A', 3), ('b', 1), ('c', 2)]");
  // [{'b': 1, 'A': 3, 'c': 2}|dictsort(true)] (repr)
  EXPECT_EQ((filter("dictsort", D({{"b", I(1)}, {"A", I(3)}, {"c", I(2)}}), {B(true)})).repr(), "[('A', 3), ('b', 1), ('c', 2)]");
  // [{'b': 1, 'A': 3, 'c': 2}|dictsort(by='value', reverse=true)] (repr)
  EXPECT_EQ((filter("dictsort", D({{"b", I(1)}, {"A", I(3)}, {"c", I(2)}}), {}, {{"by", S("value")}, {"reverse", B(true)}})).repr(), "[('A', 3), ('c', 2), ('b', 1)]");
  // {{ {'a': 1}|dictsort(by='x') }} raises
  expect_error([&] { (void)(filter("dictsort", D({{"a", I(1)}}), {}, {{"by", S("x")}})); }, "You can only sort by either \"key\" or \"value\"");
  // [['a', 'A', 'b', 'a', 1, 1.0, true]|unique|list] (repr)
  EXPECT_EQ((filter("list", filter("unique", L({S("a"), S("A"), S("b"), S("a"), I(1), Fl(1.0), B(true)})))).repr(), "['a', 'b', 1]");
  // [['a', 'A']|unique(case_sensitive=true)|list] (repr)
  EXPECT_EQ((filter("list", filter("unique", L({S("a"), S("A")}), {}, {{"case_sensitive", B(true)}}))).repr(), "['a', 'A']");
  // [[{'n': 1}, {'n': 1}, {'n': 2}]|unique(attribute='n')|list] (repr)
  EXPECT_EQ((filter("list", filter("unique", L({D({{"n", I(1)}}), D({{"n", I(1)}}), D({{"n", I(2)}})}), {}, {{"attribute", S("n")}}))).repr(), "[{'n': 1}, {'n': 2}]");
  // {{ [[1], [1]]|unique|list }} raises
  expect_error([&] { (void)(filter("list", filter("unique", L({L({I(1)}), L({I(1)})})))); }, "unhashable type: 'list'");
  // [[{'a': 'x', 'n': 1}, {'a': 'X', 'n': 2}, {'a': 'y', 'n': 3}]|groupby('a')] (repr)
  EXPECT_EQ((filter("groupby", L({D({{"a", S("x")}, {"n", I(1)}}), D({{"a", S("X")}, {"n", I(2)}}), D({{"a", S("y")}, {"n", I(3)}})}), {S("a")})).repr(), "[('x', [{'a': 'x', 'n': 1}, {'a': 'X', 'n': 2}]), ('y', [{'a': 'y', 'n': 3}])]");
  // [[{'a': 'x'}, {'a': 'X'}]|groupby('a', case_sensitive=true)] (repr)
  EXPECT_EQ((filter("groupby", L({D({{"a", S("x")}}), D({{"a", S("X")}})}), {S("a")}, {{"case_sensitive", B(true)}})).repr(), "[('X', [{'a': 'X'}]), ('x', [{'a': 'x'}])]");
  // [([{'a': 'x'}, {'b': 1}]|groupby('a', default='z'))[1].grouper] (repr)
  EXPECT_EQ((get_attribute(get_item(filter("groupby", L({D({{"a", S("x")}}), D({{"b", I(1)}})}), {S("a")}, {{"default", S("z")}}), I(1)), "grouper")).repr(), "'z'");
  // [([{'a': {'b': 2}}, {'a': {'b': 1}}]|groupby('a.b'))[0].list] (repr)
  EXPECT_EQ((get_attribute(get_item(filter("groupby", L({D({{"a", D({{"b", I(2)}})}}), D({{"a", D({{"b", I(1)}})}})}), {S("a.b")}), I(0)), "list")).repr(), "[{'a': {'b': 1}}]");
  // {{ [{'a': 1}, {'b': 1}]|groupby('a') }} raises
  expect_error([&] { (void)(filter("groupby", L({D({{"a", I(1)}}), D({{"b", I(1)}})}), {S("a")})); }, "'dict object' has no attribute 'a'");
  // [[1, 2, 3, 4, 5]|batch(2)|list] (repr)
  EXPECT_EQ((filter("list", filter("batch", L({I(1), I(2), I(3), I(4), I(5)}), {I(2)}))).repr(), "[[1, 2], [3, 4], [5]]");
  // [[1, 2, 3, 4, 5]|batch(2, 0)|list] (repr)
  EXPECT_EQ((filter("list", filter("batch", L({I(1), I(2), I(3), I(4), I(5)}), {I(2), I(0)}))).repr(), "[[1, 2], [3, 4], [5, 0]]");
  // [[1, 2, 3, 4, 5]|slice(3)|list] (repr)
  EXPECT_EQ((filter("list", filter("slice", L({I(1), I(2), I(3), I(4), I(5)}), {I(3)}))).repr(), "[[1, 2], [3, 4], [5]]");
  // [[1, 2, 3, 4, 5]|slice(3, 'x')|list] (repr)
  EXPECT_EQ((filter("list", filter("slice", L({I(1), I(2), I(3), I(4), I(5)}), {I(3), S("x")}))).repr(), "[[1, 2], [3, 4], [5, 'x']]");
  // [x|default('d')] (repr)
  EXPECT_EQ((filter("default", U(), {S("d")})).repr(), "'d'");
  // [x|d] (repr)
  EXPECT_EQ((filter("d", U())).repr(), "''");
  // [none|default('d')] (repr)
  EXPECT_EQ((filter("default", N(), {S("d")})).repr(), "None");
  // [''|default('d', true)] (repr)
  EXPECT_EQ((filter("default", S(""), {S("d"), B(true)})).repr(), "'d'");
  // [0|default(64, boolean=true)] (repr)
  EXPECT_EQ((filter("default", I(0), {I(64)}, {{"boolean", B(true)}})).repr(), "64");
  // ['v'|default('d', true)] (repr)
  EXPECT_EQ((filter("default", S("v"), {S("d"), B(true)})).repr(), "'v'");
  // [x|default([])|length] (repr)
  EXPECT_EQ((filter("length", filter("default", U(), {L({})}))).repr(), "0");
}

TEST(JinjaBuiltinsFilters, MapSelect) {
  // [['a', 'b']|map('upper')|list] (repr)
  EXPECT_EQ((filter("list", filter("map", L({S("a"), S("b")}), {S("upper")}))).repr(), "['A', 'B']");
  // [['a,b', 'c']|map('replace', ',', ';')|list] (repr)
  EXPECT_EQ((filter("list", filter("map", L({S("a,b"), S("c")}), {S("replace"), S(","), S(";")}))).repr(), "['a;b', 'c']");
  // [[{'f': {'n': 1}}, {'f': {'n': 2}}]|map(attribute='f.n')|list] (repr)
  EXPECT_EQ((filter("list", filter("map", L({D({{"f", D({{"n", I(1)}})}}), D({{"f", D({{"n", I(2)}})}})}), {}, {{"attribute", S("f.n")}}))).repr(), "[1, 2]");
  // [[{'a': 1}, {}]|map(attribute='a', default=0)|list] (repr)
  EXPECT_EQ((filter("list", filter("map", L({D({{"a", I(1)}}), D({})}), {}, {{"attribute", S("a")}, {"default", I(0)}}))).repr(), "[1, 0]");
  // [[[1, 2], [3, 4]]|map(attribute='1')|list] (repr)
  EXPECT_EQ((filter("list", filter("map", L({L({I(1), I(2)}), L({I(3), I(4)})}), {}, {{"attribute", S("1")}}))).repr(), "[2, 4]");
  // [[[1, 2], [3, 4]]|map(attribute=0)|list] (repr)
  EXPECT_EQ((filter("list", filter("map", L({L({I(1), I(2)}), L({I(3), I(4)})}), {}, {{"attribute", I(0)}}))).repr(), "[1, 3]");
  // [[1, 0, 'a', '', none]|select|list] (repr)
  EXPECT_EQ((filter("list", filter("select", L({I(1), I(0), S("a"), S(""), N()})))).repr(), "[1, 'a']");
  // [[1, 2, 3, 4]|select('odd')|list] (repr)
  EXPECT_EQ((filter("list", filter("select", L({I(1), I(2), I(3), I(4)}), {S("odd")}))).repr(), "[1, 3]");
  // [[1, 2, 3, 4]|reject('divisibleby', 2)|list] (repr)
  EXPECT_EQ((filter("list", filter("reject", L({I(1), I(2), I(3), I(4)}), {S("divisibleby"), I(2)}))).repr(), "[1, 3]");
  // [['a', 'code_interpreter']|reject('equalto', 'code_interpreter')|list] (repr)
  EXPECT_EQ((filter("list", filter("reject", L({S("a"), S("code_interpreter")}), {S("equalto"), S("code_interpreter")}))).repr(), "['a']");
  // [[1, 5, 9]|select('>', 3)|list] (repr)
  EXPECT_EQ((filter("list", filter("select", L({I(1), I(5), I(9)}), {S(">"), I(3)}))).repr(), "[5, 9]");
  // [['a', 1, none]|select('string')|list] (repr)
  EXPECT_EQ((filter("list", filter("select", L({S("a"), I(1), N()}), {S("string")}))).repr(), "['a']");
  // [[{'role': 'user'}, {'role': 'system'}]|selectattr('role', 'equalto', 'system')|list] (repr)
  EXPECT_EQ((filter("list", filter("selectattr", L({D({{"role", S("user")}}), D({{"role", S("system")}})}), {S("role"), S("equalto"), S("system")}))).repr(), "[{'role': 'system'}]");
  // [[{'type': 'a'}, {}]|selectattr('type', 'defined')|list] (repr)
  EXPECT_EQ((filter("list", filter("selectattr", L({D({{"type", S("a")}}), D({})}), {S("type"), S("defined")}))).repr(), "[{'type': 'a'}]");
  // [[{'ok': true}, {'ok': false}]|selectattr('ok')|list] (repr)
  EXPECT_EQ((filter("list", filter("selectattr", L({D({{"ok", B(true)}}), D({{"ok", B(false)}})}), {S("ok")}))).repr(), "[{'ok': True}]");
  // [[{'type': 'code_interpreter'}, {'type': 'f'}]|rejectattr('type', 'equalto', 'code_interpreter')|list] (repr)
  EXPECT_EQ((filter("list", filter("rejectattr", L({D({{"type", S("code_interpreter")}}), D({{"type", S("f")}})}), {S("type"), S("equalto"), S("code_interpreter")}))).repr(), "[{'type': 'f'}]");
  // {{ [1]|select('nosuchtest')|list }} raises
  expect_error([&] { (void)(filter("list", filter("select", L({I(1)}), {S("nosuchtest")}))); }, "No test named 'nosuchtest'.");
  // [x|select('odd')|list] (repr)
  EXPECT_EQ((filter("list", filter("select", U(), {S("odd")}))).repr(), "[]");
  // {{ [1]|map|list }} raises
  expect_error([&] { (void)(filter("list", filter("map", L({I(1)})))); }, "map requires a filter argument");
  // {{ 'x'|nosuchfilter }} raises
  expect_error([&] { (void)(filter("nosuchfilter", S("x"))); }, "No filter named 'nosuchfilter'.");
  // {{ {'a': 1}|attr('items') is callable }}
  EXPECT_TRUE(test("callable", filter("attr", D({{"a", I(1)}}), {S("items")})));
  // {{ {'a': 1}|attr('a') is undefined }}
  EXPECT_TRUE((filter("attr", D({{"a", I(1)}}), {S("a")})).is_undefined());
}

TEST(JinjaBuiltinsFilters, ToJson) {
  auto ns = std::make_shared<Object>();
  ns->is_namespace = true;
  // [{'b': 1, 'a': [1, 2.0, none, true, 'x']}|tojson] (repr)
  EXPECT_EQ((filter("tojson", D({{"b", I(1)}, {"a", L({I(1), Fl(2.0), N(), B(true), S("x")})}}))).repr(), "'{\"b\": 1, \"a\": [1, 2.0, null, true, \"x\"]}'");
  // [{'b': 1, 'a': [1, {'c': none}], 'e': [], 'f': {}}|tojson(indent=2)] (repr)
  EXPECT_EQ((filter("tojson", D({{"b", I(1)}, {"a", L({I(1), D({{"c", N()}})})}, {"e", L({})}, {"f", D({})}}), {}, {{"indent", I(2)}})).repr(), "'{\\n  \"b\": 1,\\n  \"a\": [\\n    1,\\n    {\\n      \"c\": null\\n    }\\n  ],\\n  \"e\": [],\\n  \"f\": {}\\n}'");
  // [{'b': 1, 'a': [1]}|tojson(indent='\t', sort_keys=true)] (repr)
  EXPECT_EQ((filter("tojson", D({{"b", I(1)}, {"a", L({I(1)})}}), {}, {{"indent", S("\t")}, {"sort_keys", B(true)}})).repr(), "'{\\n\\t\"a\": [\\n\\t\\t1\\n\\t],\\n\\t\"b\": 1\\n}'");
  // [[1, {'a': 2}]|tojson(separators=(',', ':'))] (repr)
  EXPECT_EQ((filter("tojson", L({I(1), D({{"a", I(2)}})}), {}, {{"separators", L({S(","), S(":")})}})).repr(), "'[1,{\"a\":2}]'");
  // [[1, [2]]|tojson(indent=0)] (repr)
  EXPECT_EQ((filter("tojson", L({I(1), L({I(2)})}), {}, {{"indent", I(0)}})).repr(), "'[\\n1,\\n[\\n2\\n]\\n]'");
  // ['é😀 "q" \\ \n\t\x01\x7f </script> & \u2028'|tojson] (repr)
  EXPECT_EQ((filter("tojson", S("é😀 \"q\" \\ \n\t\x01\x7f </script> & \u2028"))).repr(), "'\"\xc3""\xa9""\xf0""\x9f""\x98""\x80"" \\\\\"q\\\\\" \\\\\\\\ \\\\n\\\\t\\\\u0001\\x7f </script> & \\u2028\"'");
  // ['é😀\x7f'|tojson(ensure_ascii=true)] (repr)
  EXPECT_EQ((filter("tojson", S("é😀\x7f"), {}, {{"ensure_ascii", B(true)}})).repr(), "'\"\\\\u00e9\\\\ud83d\\\\ude00\\\\u007f\"'");
  // [[1e20, 0.1, -0.0, 1e-7, 100.0, 1.5e300]|tojson] (repr)
  EXPECT_EQ((filter("tojson", L({Fl(1e20), Fl(0.1), Fl(-0.0), Fl(1e-7), Fl(100.0), Fl(1.5e300)}))).repr(), "'[1e+20, 0.1, -0.0, 1e-07, 100.0, 1.5e+300]'");
  // {{ {'a': x}|tojson }} raises
  expect_error([&] { (void)(filter("tojson", D({{"a", U()}}))); }, "Object of type Undefined is not JSON serializable");
  // {{ namespace(a=1)|tojson }} raises
  expect_error([&] { (void)(filter("tojson", Value::object(ns))); }, "Object of type Namespace is not JSON serializable");
}

TEST(JinjaBuiltinsFilters, PythonSequenceKinds) {
  // {{ [1]|map('string')|tojson }} raises
  expect_error([&] { (void)(filter("tojson", filter("map", L({I(1)}), {S("string")}))); }, "Object of type generator is not JSON serializable");
  // {{ [1]|select|length }} raises
  expect_error([&] { (void)(filter("length", filter("select", L({I(1)})))); }, "object of type 'generator' has no len()");
  // {{ 'yes' if []|select else 'no' }}
  EXPECT_EQ((Value(filter("select", L({})).truthy() ? "yes" : "no")).str(), "yes");
  // {{ 'yes' if []|select|list else 'no' }}
  EXPECT_EQ((Value(filter("list", filter("select", L({}))).truthy() ? "yes" : "no")).str(), "no");
  // {{ ([1, 2]|select)[0] is undefined }}
  EXPECT_TRUE((get_item(filter("select", L({I(1), I(2)})), I(0))).is_undefined());
  // {{ [1, 2]|reverse|tojson }} raises
  expect_error([&] { (void)(filter("tojson", filter("reverse", L({I(1), I(2)})))); }, "Object of type list_reverseiterator is not JSON serializable");
  // {{ [1, 2]|select|last }} raises
  expect_error([&] { (void)(filter("last", filter("select", L({I(1), I(2)})))); }, "'generator' object is not reversible");
  // [[1, 2]|select|first] (repr)
  EXPECT_EQ((filter("first", filter("select", L({I(1), I(2)})))).repr(), "1");
  // {{ [1, 2]|select is sequence }}
  EXPECT_FALSE(test("sequence", filter("select", L({I(1), I(2)}))));
  // {{ [1, 2]|select is iterable }}
  EXPECT_TRUE(test("iterable", filter("select", L({I(1), I(2)}))));
  // [{'a': 1}.items()] (repr)
  EXPECT_EQ((method(D({{"a", I(1)}}), "items")).repr(), "dict_items([('a', 1)])");
  // [{'a': 1}.keys()] (repr)
  EXPECT_EQ((method(D({{"a", I(1)}}), "keys")).repr(), "dict_keys(['a'])");
  // [{'a': 1}.values()|length] (repr)
  EXPECT_EQ((filter("length", method(D({{"a", I(1)}}), "values"))).repr(), "1");
  // {{ {'a': 1}.keys()|tojson }} raises
  expect_error([&] { (void)(filter("tojson", method(D({{"a", I(1)}}), "keys"))); }, "Object of type dict_keys is not JSON serializable");
  // [{'a': 1}.items()|first] (repr)
  EXPECT_EQ((filter("first", method(D({{"a", I(1)}}), "items"))).repr(), "('a', 1)");
  // [{'b': 1, 'a': 2}|dictsort|first] (repr)
  EXPECT_EQ((filter("first", filter("dictsort", D({{"b", I(1)}, {"a", I(2)}})))).repr(), "('a', 2)");
  // [(1, 'a')|tojson] (repr)
  EXPECT_EQ((filter("tojson", Value::tuple({I(1), S("a")}))).repr(), "'[1, \"a\"]'");
  // [(1, 2)[1:]] (repr)
  EXPECT_EQ((get_slice(Value::tuple({I(1), I(2)}), I(1), U(), U())).repr(), "(2,)");
  // {{ (1, 2) is sequence }}
  EXPECT_TRUE(test("sequence", Value::tuple({I(1), I(2)})));
  // {{ (1, 2) is eq [1, 2] }}
  EXPECT_FALSE(test("eq", Value::tuple({I(1), I(2)}), {L({I(1), I(2)})}));
  // [(1, 2).index(2)] (repr)
  EXPECT_EQ((method(Value::tuple({I(1), I(2)}), "index", {I(2)})).repr(), "1");
  // {{ (1, 2).index(3) }} raises
  expect_error([&] { (void)(method(Value::tuple({I(1), I(2)}), "index", {I(3)})); }, "tuple.index(x): x not in tuple");
  // {{ (1, 2).append is undefined }}
  EXPECT_TRUE((get_attribute(Value::tuple({I(1), I(2)}), "append")).is_undefined());
  // ['<a>'|safe] (repr)
  EXPECT_EQ((filter("safe", S("<a>"))).repr(), "Markup('<a>')");
  // ['<a>'|safe|string] (repr)
  EXPECT_EQ((filter("string", filter("safe", S("<a>")))).repr(), "Markup('<a>')");
  // ['<a>'|e|e] (repr)
  EXPECT_EQ((filter("e", filter("e", S("<a>")))).repr(), "Markup('&lt;a&gt;')");
  // ['<a>'|e|forceescape] (repr)
  EXPECT_EQ((filter("forceescape", filter("e", S("<a>")))).repr(), "Markup('&amp;lt;a&amp;gt;')");
  // ['%s & %d'|safe|format('<', 3)] (repr)
  EXPECT_EQ((filter("format", filter("safe", S("%s & %d")), {S("<"), I(3)})).repr(), "Markup('&lt; & 3')");
}

TEST(JinjaBuiltinsFilters, UndefinedInput) {
  // {{ x|dictsort }} raises
  expect_error([&] { (void)(filter("dictsort", U())); }, "'x' is undefined");
  // {{ x|abs }} raises
  expect_error([&] { (void)(filter("abs", U())); }, "bad operand type for abs(): 'Undefined'");
  // {{ x|round }} raises
  expect_error([&] { (void)(filter("round", U())); }, "type Undefined doesn't define __round__ method");
  // [x|sum] (repr)
  EXPECT_EQ((filter("sum", U())).repr(), "0");
  // {{ x|max is undefined }}
  EXPECT_TRUE((filter("max", U())).is_undefined());
  // [x|unique|list] (repr)
  EXPECT_EQ((filter("list", filter("unique", U()))).repr(), "[]");
  // [x|map('upper')|list] (repr)
  EXPECT_EQ((filter("list", filter("map", U(), {S("upper")}))).repr(), "[]");
  // [x|batch(2)|list] (repr)
  EXPECT_EQ((filter("list", filter("batch", U(), {I(2)}))).repr(), "[]");
  // [x|slice(2)|list] (repr)
  EXPECT_EQ((filter("list", filter("slice", U(), {I(2)}))).repr(), "[[], []]");
  // [x|center(5)] (repr)
  EXPECT_EQ((filter("center", U(), {I(5)})).repr(), "'     '");
  // {{ x|indent }} raises
  expect_error([&] { (void)(filter("indent", U())); }, "'x' is undefined");
  // [x|title] (repr)
  EXPECT_EQ((filter("title", U())).repr(), "''");
  // [x|wordcount] (repr)
  EXPECT_EQ((filter("wordcount", U())).repr(), "0");
  // [x|escape] (repr)
  EXPECT_EQ((filter("escape", U())).repr(), "Markup('')");
  // [x|safe] (repr)
  EXPECT_EQ((filter("safe", U())).repr(), "Markup('')");
  // [x|reverse|list] (repr)
  EXPECT_EQ((filter("list", filter("reverse", U()))).repr(), "[]");
  // [x|striptags] (repr)
  EXPECT_EQ((filter("striptags", U())).repr(), "''");
  // [x|truncate(5)] (repr)
  EXPECT_EQ((filter("truncate", U(), {I(5)})).repr(), "Undefined");
  // [x|capitalize] (repr)
  EXPECT_EQ((filter("capitalize", U())).repr(), "''");
  // [x|upper] (repr)
  EXPECT_EQ((filter("upper", U())).repr(), "''");
  // [x|trim] (repr)
  EXPECT_EQ((filter("trim", U())).repr(), "''");
  // [x|replace('a', 'b')] (repr)
  EXPECT_EQ((filter("replace", U(), {S("a"), S("b")})).repr(), "''");
  // [x|string] (repr)
  EXPECT_EQ((filter("string", U())).repr(), "''");
  // {{ x|format(1) }} raises
  expect_error([&] { (void)(filter("format", U(), {I(1)})); }, "not all arguments converted during string formatting");
  // [x|pprint] (repr)
  EXPECT_EQ((filter("pprint", U())).repr(), "'Undefined'");
  // {{ x|last is undefined }}
  EXPECT_TRUE((filter("last", U())).is_undefined());
  // [x|count] (repr)
  EXPECT_EQ((filter("count", U())).repr(), "0");
  // {{ x|tojson }} raises
  expect_error([&] { (void)(filter("tojson", U())); }, "Object of type Undefined is not JSON serializable");
  // {{ x|attr('a') }} raises
  expect_error([&] { (void)(filter("attr", U(), {S("a")})); }, "'x' is undefined");
}
