// jinja2's tests, str/list/dict methods and member access (filters: jinja_builtins_test.cc), checked
// against Python jinja2 3.1 with transformers' settings (ImmutableSandboxedEnvironment,
// tojson = json.dumps(ensure_ascii=False, ...)). Each case names the Jinja
// expression that produced its expected value; `[expr] (repr)` means the value
// was read as Python's repr() of the element (print of a one-item list).
// Where jinja2 yields a generator, the oracle expression adds |list.
#include "jinja_value_test_util.h"

using namespace corvid::jinja;          // NOLINT: test shorthand
using namespace corvid::jinja::testing;  // NOLINT


TEST(JinjaBuiltinsTests, Tests) {
  auto ns = std::make_shared<Object>();
  ns->is_namespace = true;
  // {{ x is defined }}
  EXPECT_FALSE(test("defined", U()));
  // {{ none is defined }}
  EXPECT_TRUE(test("defined", N()));
  // {{ x is undefined }}
  EXPECT_TRUE(test("undefined", U()));
  // {{ none is none }}
  EXPECT_TRUE(test("none", N()));
  // {{ 0 is none }}
  EXPECT_FALSE(test("none", I(0)));
  // {{ false is boolean }}
  EXPECT_TRUE(test("boolean", B(false)));
  // {{ 0 is boolean }}
  EXPECT_FALSE(test("boolean", I(0)));
  // {{ true is true }}
  EXPECT_TRUE(test("true", B(true)));
  // {{ 1 is true }}
  EXPECT_FALSE(test("true", I(1)));
  // {{ false is false }}
  EXPECT_TRUE(test("false", B(false)));
  // {{ 0 is false }}
  EXPECT_FALSE(test("false", I(0)));
  // {{ 1 is integer }}
  EXPECT_TRUE(test("integer", I(1)));
  // {{ true is integer }}
  EXPECT_FALSE(test("integer", B(true)));
  // {{ 1.0 is integer }}
  EXPECT_FALSE(test("integer", Fl(1.0)));
  // {{ 1.0 is float }}
  EXPECT_TRUE(test("float", Fl(1.0)));
  // {{ 1 is number }}
  EXPECT_TRUE(test("number", I(1)));
  // {{ true is number }}
  EXPECT_TRUE(test("number", B(true)));
  // {{ '1' is number }}
  EXPECT_FALSE(test("number", S("1")));
  // {{ '' is string }}
  EXPECT_TRUE(test("string", S("")));
  // {{ x is string }}
  EXPECT_FALSE(test("string", U()));
  // {{ {} is mapping }}
  EXPECT_TRUE(test("mapping", D({})));
  // {{ [] is mapping }}
  EXPECT_FALSE(test("mapping", L({})));
  // {{ namespace() is mapping }}
  EXPECT_FALSE(test("mapping", Value::object(ns)));
  // {{ '' is sequence }}
  EXPECT_TRUE(test("sequence", S("")));
  // {{ {} is sequence }}
  EXPECT_TRUE(test("sequence", D({})));
  // {{ 1 is sequence }}
  EXPECT_FALSE(test("sequence", I(1)));
  // {{ x is sequence }}
  EXPECT_TRUE(test("sequence", U()));
  // {{ none is iterable }}
  EXPECT_FALSE(test("iterable", N()));
  // {{ 'a' is iterable }}
  EXPECT_TRUE(test("iterable", S("a")));
  // {{ x is iterable }}
  EXPECT_TRUE(test("iterable", U()));
  // {{ 'a'.upper is callable }}
  EXPECT_TRUE(test("callable", get_attribute(S("a"), "upper")));
  // {{ 'a' is callable }}
  EXPECT_FALSE(test("callable", S("a")));
  // {{ none is sameas none }}
  EXPECT_TRUE(test("sameas", N(), {N()}));
  // {{ false is sameas 0 }}
  EXPECT_FALSE(test("sameas", B(false), {I(0)}));
  // {{ 1 is equalto 1.0 }}
  EXPECT_TRUE(test("equalto", I(1), {Fl(1.0)}));
  // {{ 1 is eq true }}
  EXPECT_TRUE(test("eq", I(1), {B(true)}));
  // [['a', 'b']|select('==', 'a')|list] (repr)
  EXPECT_EQ((filter("list", filter("select", L({S("a"), S("b")}), {S("=="), S("a")}))).repr(), "['a']");
  // {{ [1, {'a': 'b'}] is eq [1.0, {'a': 'b'}] }}
  EXPECT_TRUE(test("eq", L({I(1), D({{"a", S("b")}})}), {L({Fl(1.0), D({{"a", S("b")}})})}));
  // {{ 1 is ne '1' }}
  EXPECT_TRUE(test("ne", I(1), {S("1")}));
  // {{ 2 is lt 2.5 }}
  EXPECT_TRUE(test("lt", I(2), {Fl(2.5)}));
  // {{ 'b' is lt 'a' }}
  EXPECT_FALSE(test("lt", S("b"), {S("a")}));
  // {{ 2 is le 2 }}
  EXPECT_TRUE(test("le", I(2), {I(2)}));
  // {{ 2 is gt 1 }}
  EXPECT_TRUE(test("gt", I(2), {I(1)}));
  // {{ 2 is ge 3 }}
  EXPECT_FALSE(test("ge", I(2), {I(3)}));
  // [[1, 2, 3]|select('>=', 2.0)|list] (repr)
  EXPECT_EQ((filter("list", filter("select", L({I(1), I(2), I(3)}), {S(">="), Fl(2.0)}))).repr(), "[2, 3]");
  // {{ [1, 2] is lt [1, 3] }}
  EXPECT_TRUE(test("<", L({I(1), I(2)}), {L({I(1), I(3)})}));
  // {{ none is lt 1 }} raises
  expect_error([&] { (void)(test("lt", N(), {I(1)})); }, "'<' not supported between instances of 'NoneType' and 'int'");
  // {{ 'a' is le 1 }} raises
  expect_error([&] { (void)(test("le", S("a"), {I(1)})); }, "'<=' not supported between instances of 'str' and 'int'");
  // {{ 'b' is in 'abc' }}
  EXPECT_TRUE(test("in", S("b"), {S("abc")}));
  // {{ 1 is in [1.0, 2] }}
  EXPECT_TRUE(test("in", I(1), {L({Fl(1.0), I(2)})}));
  // {{ 'k' is in {'k': 1} }}
  EXPECT_TRUE(test("in", S("k"), {D({{"k", I(1)}})}));
  // {{ 'a' is in x }}
  EXPECT_FALSE(test("in", S("a"), {U()}));
  // {{ 1 is in 'abc' }} raises
  expect_error([&] { (void)(test("in", I(1), {S("abc")})); }, "'in <string>' requires string as left operand, not int");
  // {{ 3 is odd }}
  EXPECT_TRUE(test("odd", I(3)));
  // {{ -3 is odd }}
  EXPECT_TRUE(test("odd", I(-3)));
  // {{ 3.0 is odd }}
  EXPECT_TRUE(test("odd", Fl(3.0)));
  // {{ 4 is even }}
  EXPECT_TRUE(test("even", I(4)));
  // {{ 'a' is even }} raises
  expect_error([&] { (void)(test("even", S("a"))); }, "not all arguments converted during string formatting");
  // {{ 9 is divisibleby 3 }}
  EXPECT_TRUE(test("divisibleby", I(9), {I(3)}));
  // {{ 9 is divisibleby 0 }} raises
  expect_error([&] { (void)(test("divisibleby", I(9), {I(0)})); }, "integer modulo by zero");
  // {{ 'abc d' is lower }}
  EXPECT_TRUE(test("lower", S("abc d")));
  // {{ 'Abc' is lower }}
  EXPECT_FALSE(test("lower", S("Abc")));
  // {{ '123' is lower }}
  EXPECT_FALSE(test("lower", S("123")));
  // {{ 'ÉCOLE' is upper }}
  EXPECT_TRUE(test("upper", S("ÉCOLE")));
  // {{ 'upper' is filter }}
  EXPECT_TRUE(test("filter", S("upper")));
  // {{ 'nosuch' is filter }}
  EXPECT_FALSE(test("filter", S("nosuch")));
  // {{ 'odd' is test }}
  EXPECT_TRUE(test("test", S("odd")));
  // {{ 'x'|e is escaped }}
  EXPECT_TRUE(test("escaped", filter("e", S("x"))));
  // {{ 'x' is escaped }}
  EXPECT_FALSE(test("escaped", S("x")));
  // {{ 1 is nosuchtest }} raises
  expect_error([&] { (void)(test("nosuchtest", I(1))); }, "No test named 'nosuchtest'.");
}

TEST(JinjaBuiltinsMethods, StrMethods) {
  // ['hello'.startswith('he')] (repr)
  EXPECT_EQ((method(S("hello"), "startswith", {S("he")})).repr(), "True");
  // ['hello'.startswith(('x', 'hel'))] (repr)
  EXPECT_EQ((method(S("hello"), "startswith", {L({S("x"), S("hel")})})).repr(), "True");
  // ['hello'.startswith('l', 2)] (repr)
  EXPECT_EQ((method(S("hello"), "startswith", {S("l"), I(2)})).repr(), "True");
  // ['hello'.endswith('lo')] (repr)
  EXPECT_EQ((method(S("hello"), "endswith", {S("lo")})).repr(), "True");
  // ['hello'.endswith(('x', 'y'))] (repr)
  EXPECT_EQ((method(S("hello"), "endswith", {L({S("x"), S("y")})})).repr(), "False");
  // {{ 'hello'.startswith(1) }} raises
  expect_error([&] { (void)(method(S("hello"), "startswith", {I(1)})); }, "startswith first arg must be str or a tuple of str, not int");
  // ['a,b,,c'.split(',')] (repr)
  EXPECT_EQ((method(S("a,b,,c"), "split", {S(",")})).repr(), "['a', 'b', '', 'c']");
  // ['a,b,,c'.split(',', 1)] (repr)
  EXPECT_EQ((method(S("a,b,,c"), "split", {S(","), I(1)})).repr(), "['a', 'b,,c']");
  // ['  a  b\n c '.split()] (repr)
  EXPECT_EQ((method(S("  a  b\n c "), "split")).repr(), "['a', 'b', 'c']");
  // ['  a  b\n c '.split(none, 1)] (repr)
  EXPECT_EQ((method(S("  a  b\n c "), "split", {N(), I(1)})).repr(), "['a', 'b\\n c ']");
  // [''.split()] (repr)
  EXPECT_EQ((method(S(""), "split")).repr(), "[]");
  // [''.split(',')] (repr)
  EXPECT_EQ((method(S(""), "split", {S(",")})).repr(), "['']");
  // ['a<sep>b'.split('<sep>')] (repr)
  EXPECT_EQ((method(S("a<sep>b"), "split", {S("<sep>")})).repr(), "['a', 'b']");
  // ['a,b,c'.rsplit(',', 1)] (repr)
  EXPECT_EQ((method(S("a,b,c"), "rsplit", {S(","), I(1)})).repr(), "['a,b', 'c']");
  // ['  a b  c  '.rsplit(none, 1)] (repr)
  EXPECT_EQ((method(S("  a b  c  "), "rsplit", {N(), I(1)})).repr(), "['  a b', 'c']");
  // {{ 'a'.split('') }} raises
  expect_error([&] { (void)(method(S("a"), "split", {S("")})); }, "empty separator");
  // ['a b'.split(maxsplit=0)] (repr)
  EXPECT_EQ((method(S("a b"), "split", {}, {{"maxsplit", I(0)}})).repr(), "['a b']");
  // ['\n x \t'.strip()] (repr)
  EXPECT_EQ((method(S("\n x \t"), "strip")).repr(), "'x'");
  // ['xyhixy'.strip('xy')] (repr)
  EXPECT_EQ((method(S("xyhixy"), "strip", {S("xy")})).repr(), "'hi'");
  // ['  hi  '.lstrip()] (repr)
  EXPECT_EQ((method(S("  hi  "), "lstrip")).repr(), "'hi  '");
  // ['  hi  '.rstrip()] (repr)
  EXPECT_EQ((method(S("  hi  "), "rstrip")).repr(), "'  hi'");
  // ['<think>x'.lstrip('<think>')] (repr)
  EXPECT_EQ((method(S("<think>x"), "lstrip", {S("<think>")})).repr(), "'x'");
  // ['ab\n\n'.rstrip('\n')] (repr)
  EXPECT_EQ((method(S("ab\n\n"), "rstrip", {S("\n")})).repr(), "'ab'");
  // ['aBc'.upper()] (repr)
  EXPECT_EQ((method(S("aBc"), "upper")).repr(), "'ABC'");
  // ['aBc'.lower()] (repr)
  EXPECT_EQ((method(S("aBc"), "lower")).repr(), "'abc'");
  // ['hello wORLD 3rd'.title()] (repr)
  EXPECT_EQ((method(S("hello wORLD 3rd"), "title")).repr(), "'Hello World 3Rd'");
  // ['ΣΑΣ ΟΔΟΣ'.title()] (repr)
  EXPECT_EQ((method(S("ΣΑΣ ΟΔΟΣ"), "title")).repr(), "'\xce""\xa3""\xce""\xb1""\xcf""\x82"" \xce""\x9f""\xce""\xb4""\xce""\xbf""\xcf""\x82""'");
  // ['ßa'.capitalize()] (repr)
  EXPECT_EQ((method(S("ßa"), "capitalize")).repr(), "'Ssa'");
  // ['aaa'.replace('a', 'b', 2)] (repr)
  EXPECT_EQ((method(S("aaa"), "replace", {S("a"), S("b"), I(2)})).repr(), "'bba'");
  // ['héllo'.find('l')] (repr)
  EXPECT_EQ((method(S("héllo"), "find", {S("l")})).repr(), "2");
  // ['héllo'.rfind('l')] (repr)
  EXPECT_EQ((method(S("héllo"), "rfind", {S("l")})).repr(), "3");
  // ['hello'.find('z')] (repr)
  EXPECT_EQ((method(S("hello"), "find", {S("z")})).repr(), "-1");
  // ['hello'.find('l', 3)] (repr)
  EXPECT_EQ((method(S("hello"), "find", {S("l"), I(3)})).repr(), "3");
  // ['hello'.index('e')] (repr)
  EXPECT_EQ((method(S("hello"), "index", {S("e")})).repr(), "1");
  // {{ 'hello'.index('z') }} raises
  expect_error([&] { (void)(method(S("hello"), "index", {S("z")})); }, "substring not found");
  // ['abab'.count('ab')] (repr)
  EXPECT_EQ((method(S("abab"), "count", {S("ab")})).repr(), "2");
  // ['abc'.count('')] (repr)
  EXPECT_EQ((method(S("abc"), "count", {S("")})).repr(), "4");
  // [', '.join(['a', 'b'])] (repr)
  EXPECT_EQ((method(S(", "), "join", {L({S("a"), S("b")})})).repr(), "'a, b'");
  // ['-'.join('abc')] (repr)
  EXPECT_EQ((method(S("-"), "join", {S("abc")})).repr(), "'a-b-c'");
  // {{ ', '.join(['a', 1]) }} raises
  expect_error([&] { (void)(method(S(", "), "join", {L({S("a"), I(1)})})); }, "sequence item 1: expected str instance, int found");
  // ['{} and {}'.format('a', 1)] (repr)
  EXPECT_EQ((method(S("{} and {}"), "format", {S("a"), I(1)})).repr(), "'a and 1'");
  // ['{1}{0}{1}'.format('a', 'b')] (repr)
  EXPECT_EQ((method(S("{1}{0}{1}"), "format", {S("a"), S("b")})).repr(), "'bab'");
  // ['{name}: {v!r} {{x}}'.format(name='k', v='q')] (repr)
  EXPECT_EQ((method(S("{name}: {v!r} {{x}}"), "format", {}, {{"name", S("k")}, {"v", S("q")}})).repr(), "\"k: 'q' {x}\"");
  // ['[{:>5}|{:<4}|{:^6}|{:*^7}]'.format('a', 'b', 'c', 'd')] (repr)
  EXPECT_EQ((method(S("[{:>5}|{:<4}|{:^6}|{:*^7}]"), "format", {S("a"), S("b"), S("c"), S("d")})).repr(), "'[    a|b   |  c   |***d***]'");
  // ['{:.2f} {:5d} {:05d} {:,} {:x} {:+d} {:.1%} {:e} {:g}'.format(3.14159, 42, -42, 1234567, 255, 5, 0.256, 12345.678, 0.00001234)] (repr)
  EXPECT_EQ((method(S("{:.2f} {:5d} {:05d} {:,} {:x} {:+d} {:.1%} {:e} {:g}"), "format", {Fl(3.14159), I(42), I(-42), I(1234567), I(255), I(5), Fl(0.256), Fl(12345.678), Fl(0.00001234)})).repr(), "'3.14    42 -0042 1,234,567 ff +5 25.6% 1.234568e+04 1.234e-05'");
  // ['{} {} {}'.format(1.0, none, [1, 'a'])] (repr)
  EXPECT_EQ((method(S("{} {} {}"), "format", {Fl(1.0), N(), L({I(1), S("a")})})).repr(), "\"1.0 None [1, 'a']\"");
  // ['{0[a]} {1[1]} {0.a}'.format({'a': 'x'}, [1, 2])] (repr)
  EXPECT_EQ((method(S("{0[a]} {1[1]} {0.a}"), "format", {D({{"a", S("x")}}), L({I(1), I(2)})})).repr(), "'x 2 x'");
  // ['{:.3}'.format('abcdef')] (repr)
  EXPECT_EQ((method(S("{:.3}"), "format", {S("abcdef")})).repr(), "'abc'");
  // ['{:{w}}|'.format('a', w=4)] (repr)
  EXPECT_EQ((method(S("{:{w}}|"), "format", {S("a")}, {{"w", I(4)}})).repr(), "'a   |'");
  // {{ '{}'.format() }} raises
  expect_error([&] { (void)(method(S("{}"), "format")); }, "tuple index out of range");
  // {{ '{x}'.format() }} raises
  expect_error([&] { (void)(method(S("{x}"), "format")); }, "'x'");
  // {{ '{0}{}'.format(1, 2) }} raises
  expect_error([&] { (void)(method(S("{0}{}"), "format", {I(1), I(2)})); }, "cannot switch from manual field specification to automatic field numbering");
  // {{ '}'.format() }} raises
  expect_error([&] { (void)(method(S("}"), "format")); }, "Single '}' encountered in format string");
  // ['123'.isdigit()] (repr)
  EXPECT_EQ((method(S("123"), "isdigit")).repr(), "True");
  // [''.isdigit()] (repr)
  EXPECT_EQ((method(S(""), "isdigit")).repr(), "False");
  // ['12a'.isdigit()] (repr)
  EXPECT_EQ((method(S("12a"), "isdigit")).repr(), "False");
  // ['héllo'.isalpha()] (repr)
  EXPECT_EQ((method(S("héllo"), "isalpha")).repr(), "True");
  // [' \t\n'.isspace()] (repr)
  EXPECT_EQ((method(S(" \t\n"), "isspace")).repr(), "True");
  // ['ab12'.isalnum()] (repr)
  EXPECT_EQ((method(S("ab12"), "isalnum")).repr(), "True");
  // ['AB1'.isupper()] (repr)
  EXPECT_EQ((method(S("AB1"), "isupper")).repr(), "True");
  // ['ab1'.islower()] (repr)
  EXPECT_EQ((method(S("ab1"), "islower")).repr(), "True");
  // ['1'.islower()] (repr)
  EXPECT_EQ((method(S("1"), "islower")).repr(), "False");
  // ['a\nb\r\nc\rd\n'.splitlines()] (repr)
  EXPECT_EQ((method(S("a\nb\r\nc\rd\n"), "splitlines")).repr(), "['a', 'b', 'c', 'd']");
  // ['a\nb\r\n'.splitlines(true)] (repr)
  EXPECT_EQ((method(S("a\nb\r\n"), "splitlines", {B(true)})).repr(), "['a\\n', 'b\\r\\n']");
  // ['42'.zfill(5)] (repr)
  EXPECT_EQ((method(S("42"), "zfill", {I(5)})).repr(), "'00042'");
  // ['-42'.zfill(5)] (repr)
  EXPECT_EQ((method(S("-42"), "zfill", {I(5)})).repr(), "'-0042'");
  // ['ab'.center(6, '*')] (repr)
  EXPECT_EQ((method(S("ab"), "center", {I(6), S("*")})).repr(), "'**ab**'");
  // ['ab'.ljust(4)] (repr)
  EXPECT_EQ((method(S("ab"), "ljust", {I(4)})).repr(), "'ab  '");
  // ['ab'.rjust(4, '0')] (repr)
  EXPECT_EQ((method(S("ab"), "rjust", {I(4), S("0")})).repr(), "'00ab'");
  // ['a=b=c'.partition('=')] (repr)
  EXPECT_EQ((method(S("a=b=c"), "partition", {S("=")})).repr(), "('a', '=', 'b=c')");
  // ['a=b=c'.rpartition('=')] (repr)
  EXPECT_EQ((method(S("a=b=c"), "rpartition", {S("=")})).repr(), "('a=b', '=', 'c')");
  // ['b '.startswith('', 10)] (repr)
  EXPECT_EQ((method(S("b "), "startswith", {S(""), I(10)})).repr(), "False");
  // ['abc'.count('', 10, 10)] (repr)
  EXPECT_EQ((method(S("abc"), "count", {S(""), I(10), I(10)})).repr(), "0");
  // ['abc'.find('', 3)] (repr)
  EXPECT_EQ((method(S("abc"), "find", {S(""), I(3)})).repr(), "3");
  // ['abc'.find('', 2, 1)] (repr)
  EXPECT_EQ((method(S("abc"), "find", {S(""), I(2), I(1)})).repr(), "-1");
  // ['aé😀'.find('', -2)] (repr)
  EXPECT_EQ((method(S("aé😀"), "find", {S(""), I(-2)})).repr(), "1");
  // ['{:c}'.format(980)] (repr)
  EXPECT_EQ((method(S("{:c}"), "format", {I(980)})).repr(), "'\xcf""\x94""'");
  // {{ '{:,}'.format('a') }} raises
  expect_error([&] { (void)(method(S("{:,}"), "format", {S("a")})); }, "Cannot specify ',' with 's'.");
  // ['{:.3}|{:.1}|{:.4}'.format(100.0, 1.5, 0.00001234)] (repr)
  EXPECT_EQ((method(S("{:.3}|{:.1}|{:.4}"), "format", {Fl(100.0), Fl(1.5), Fl(0.00001234)})).repr(), "'1e+02|2e+00|1.234e-05'");
  // ['{:08.3f}|{:=+8d}|{:_}|{:#x}|{:b}|{:10.4e}|{:G}'.format(-3.14159, 42, 1234567, 255, 5, 12345.678, 1e-20)] (repr)
  EXPECT_EQ((method(S("{:08.3f}|{:=+8d}|{:_}|{:#x}|{:b}|{:10.4e}|{:G}"), "format", {Fl(-3.14159), I(42), I(1234567), I(255), I(5), Fl(12345.678), Fl(1e-20)})).repr(), "'-003.142|+     42|1_234_567|0xff|101|1.2346e+04|1E-20'");
  // ['Straße ǅx İ'.casefold()] (repr)
  EXPECT_EQ((method(S("Straße ǅx İ"), "casefold")).repr(), "'strasse \xc7""\x86""x i\xcc""\x87""'");
  // ['Hello wORLD ß'.swapcase()] (repr)
  EXPECT_EQ((method(S("Hello wORLD ß"), "swapcase")).repr(), "'hELLO World SS'");
  // ['a\tbc\td\n\te'.expandtabs()] (repr)
  EXPECT_EQ((method(S("a\tbc\td\n\te"), "expandtabs")).repr(), "'a       bc      d\\n        e'");
  // ['a\tbc'.expandtabs(4)] (repr)
  EXPECT_EQ((method(S("a\tbc"), "expandtabs", {I(4)})).repr(), "'a   bc'");
  // ['{a}-{b!r}'.format_map({'a': 1, 'b': 'x'})] (repr)
  EXPECT_EQ((method(S("{a}-{b!r}"), "format_map", {D({{"a", I(1)}, {"b", S("x")}})})).repr(), "\"1-'x'\"");
  // ['abc'.isascii()] (repr)
  EXPECT_EQ((method(S("abc"), "isascii")).repr(), "True");
  // ['é'.isascii()] (repr)
  EXPECT_EQ((method(S("é"), "isascii")).repr(), "False");
  // ['a\tb'.isprintable()] (repr)
  EXPECT_EQ((method(S("a\tb"), "isprintable")).repr(), "False");
  // ['Hello World'.istitle()] (repr)
  EXPECT_EQ((method(S("Hello World"), "istitle")).repr(), "True");
  // ['Hello world'.istitle()] (repr)
  EXPECT_EQ((method(S("Hello world"), "istitle")).repr(), "False");
  // ['ǅungla'.istitle()] (repr)
  EXPECT_EQ((method(S("ǅungla"), "istitle")).repr(), "True");
  // ['HELLO'.istitle()] (repr)
  EXPECT_EQ((method(S("HELLO"), "istitle")).repr(), "False");
  // ['1A'.istitle()] (repr)
  EXPECT_EQ((method(S("1A"), "istitle")).repr(), "True");
  // [''.istitle()] (repr)
  EXPECT_EQ((method(S(""), "istitle")).repr(), "False");
  // ['A1 B2'.istitle()] (repr)
  EXPECT_EQ((method(S("A1 B2"), "istitle")).repr(), "True");
  // ['prefix-x'.removeprefix('prefix-')] (repr)
  EXPECT_EQ((method(S("prefix-x"), "removeprefix", {S("prefix-")})).repr(), "'x'");
}

TEST(JinjaBuiltinsMethods, ListAndDictMethods) {
  // [[1, 2, 1].count(1)] (repr)
  EXPECT_EQ((method(L({I(1), I(2), I(1)}), "count", {I(1)})).repr(), "2");
  // [['a', 'b'].index('b')] (repr)
  EXPECT_EQ((method(L({S("a"), S("b")}), "index", {S("b")})).repr(), "1");
  // {{ ['a', 'b'].index('z') }} raises
  expect_error([&] { (void)(method(L({S("a"), S("b")}), "index", {S("z")})); }, "'z' is not in list");
  // [{'a': 1, 'b': 2}.items()|list] (repr)
  EXPECT_EQ((filter("list", method(D({{"a", I(1)}, {"b", I(2)}}), "items"))).repr(), "[('a', 1), ('b', 2)]");
  // [{'a': 1, 'b': 2}.keys()|list] (repr)
  EXPECT_EQ((filter("list", method(D({{"a", I(1)}, {"b", I(2)}}), "keys"))).repr(), "['a', 'b']");
  // [{'a': 1, 'b': 2}.values()|list] (repr)
  EXPECT_EQ((filter("list", method(D({{"a", I(1)}, {"b", I(2)}}), "values"))).repr(), "[1, 2]");
  // [{'a': 1}.get('a')] (repr)
  EXPECT_EQ((method(D({{"a", I(1)}}), "get", {S("a")})).repr(), "1");
  // [{'a': 1}.get('z')] (repr)
  EXPECT_EQ((method(D({{"a", I(1)}}), "get", {S("z")})).repr(), "None");
  // [{'a': 1}.get('z', 'd')] (repr)
  EXPECT_EQ((method(D({{"a", I(1)}}), "get", {S("z"), S("d")})).repr(), "'d'");
  // [{'a': none}.get('a', 'd')] (repr)
  EXPECT_EQ((method(D({{"a", N()}}), "get", {S("a"), S("d")})).repr(), "None");
  // {{ [1].append(2) }} raises
  expect_error([&] { (void)(method(L({I(1)}), "append", {I(2)})); }, "access to attribute 'append' of 'list' object is unsafe.");
  // {{ [1].pop(0) }} raises
  expect_error([&] { (void)(method(L({I(1)}), "pop", {I(0)})); }, "access to attribute 'pop' of 'list' object is unsafe.");
  // {{ [1].sort() }} raises
  expect_error([&] { (void)(method(L({I(1)}), "sort")); }, "access to attribute 'sort' of 'list' object is unsafe.");
  // {{ {'a': 1}.update({}) }} raises
  expect_error([&] { (void)(method(D({{"a", I(1)}}), "update", {D({})})); }, "access to attribute 'update' of 'dict' object is unsafe.");
  // {{ {'a': 1}.pop('a') }} raises
  expect_error([&] { (void)(method(D({{"a", I(1)}}), "pop", {S("a")})); }, "access to attribute 'pop' of 'dict' object is unsafe.");
  // {{ {'a': 1}.setdefault('a') }} raises
  expect_error([&] { (void)(method(D({{"a", I(1)}}), "setdefault", {S("a")})); }, "access to attribute 'setdefault' of 'dict' object is unsafe.");
}

TEST(JinjaBuiltinsAccess, AttributesItemsSlices) {
  // [{'a': 1}.a] (repr)
  EXPECT_EQ((get_attribute(D({{"a", I(1)}}), "a")).repr(), "1");
  // [{'items': 1}['items']] (repr)
  EXPECT_EQ((get_item(D({{"items", I(1)}}), S("items"))).repr(), "1");
  // {{ {'items': 1}.items is callable }}
  EXPECT_TRUE(test("callable", get_attribute(D({{"items", I(1)}}), "items")));
  // {{ {'get': 1}['keys'] is callable }}
  EXPECT_TRUE(test("callable", get_item(D({{"get", I(1)}}), S("keys"))));
  // {{ {'a': 1}.b is undefined }}
  EXPECT_TRUE((get_attribute(D({{"a", I(1)}}), "b")).is_undefined());
  // {{ {'a': 1}['b'] is undefined }}
  EXPECT_TRUE((get_item(D({{"a", I(1)}}), S("b"))).is_undefined());
  // [[10, 20, 30][-1]] (repr)
  EXPECT_EQ((get_item(L({I(10), I(20), I(30)}), I(-1))).repr(), "30");
  // {{ [10, 20, 30][3] is undefined }}
  EXPECT_TRUE((get_item(L({I(10), I(20), I(30)}), I(3))).is_undefined());
  // [[10, 20][true]] (repr)
  EXPECT_EQ((get_item(L({I(10), I(20)}), B(true))).repr(), "20");
  // ['héllo'[1]] (repr)
  EXPECT_EQ((get_item(S("héllo"), I(1))).repr(), "'\xc3""\xa9""'");
  // ['héllo'[-1]] (repr)
  EXPECT_EQ((get_item(S("héllo"), I(-1))).repr(), "'o'");
  // {{ 'abc'.nosuch is undefined }}
  EXPECT_TRUE((get_attribute(S("abc"), "nosuch")).is_undefined());
  // {{ none.a is undefined }}
  EXPECT_TRUE((get_attribute(N(), "a")).is_undefined());
  // [[1, 2, 3, 4, 5][1:3]] (repr)
  EXPECT_EQ((get_slice(L({I(1), I(2), I(3), I(4), I(5)}), I(1), I(3), U())).repr(), "[2, 3]");
  // [[1, 2, 3, 4, 5][::-1]] (repr)
  EXPECT_EQ((get_slice(L({I(1), I(2), I(3), I(4), I(5)}), U(), U(), I(-1))).repr(), "[5, 4, 3, 2, 1]");
  // [[1, 2, 3, 4, 5][-2:]] (repr)
  EXPECT_EQ((get_slice(L({I(1), I(2), I(3), I(4), I(5)}), I(-2), U(), U())).repr(), "[4, 5]");
  // [[1, 2, 3, 4, 5][:-2]] (repr)
  EXPECT_EQ((get_slice(L({I(1), I(2), I(3), I(4), I(5)}), U(), I(-2), U())).repr(), "[1, 2, 3]");
  // [[1, 2, 3, 4, 5][::2]] (repr)
  EXPECT_EQ((get_slice(L({I(1), I(2), I(3), I(4), I(5)}), U(), U(), I(2))).repr(), "[1, 3, 5]");
  // [[1, 2, 3, 4, 5][4:1:-2]] (repr)
  EXPECT_EQ((get_slice(L({I(1), I(2), I(3), I(4), I(5)}), I(4), I(1), I(-2))).repr(), "[5, 3]");
  // [[1, 2, 3][10:]] (repr)
  EXPECT_EQ((get_slice(L({I(1), I(2), I(3)}), I(10), U(), U())).repr(), "[]");
  // [[1, 2, 3][-10:2]] (repr)
  EXPECT_EQ((get_slice(L({I(1), I(2), I(3)}), I(-10), I(2), U())).repr(), "[1, 2]");
  // ['héllo wörld'[1:7]] (repr)
  EXPECT_EQ((get_slice(S("héllo wörld"), I(1), I(7), U())).repr(), "'\xc3""\xa9""llo w'");
  // ['héllo'[::-1]] (repr)
  EXPECT_EQ((get_slice(S("héllo"), U(), U(), I(-1))).repr(), "'oll\xc3""\xa9""h'");
  // {{ (x|default({'a': 1}))[1:2] }} raises
  expect_error([&] { (void)(get_slice(D({{"a", I(1)}}), I(1), I(2), U())); }, "unhashable type: 'slice'");
  // {{ (x|default(none, true))[::2] }} raises
  expect_error([&] { (void)(get_slice(N(), U(), U(), I(2))); }, "'NoneType' object is not subscriptable");
  // {{ ([1]|select)[:1] }} raises
  expect_error([&] { (void)(get_slice(filter("select", L({I(1)})), U(), I(1), U())); }, "'generator' object is not subscriptable");
  // {{ 'abc'[::0] }} raises
  expect_error([&] { (void)(get_slice(S("abc"), U(), U(), I(0))); }, "slice step cannot be zero");
}

TEST(JinjaBuiltinsAccess, UndefinedMessages) {
  // {{ x.y }} raises
  expect_error([&] { (void)(get_attribute(Value::undefined("x"), "y")); }, "'x' is undefined");
  // {{ x['y'] }} raises
  expect_error([&] { (void)(get_item(Value::undefined("x"), S("y"))); }, "'x' is undefined");
  // {{ {}.a.b }} raises
  expect_error([&] { (void)(get_attribute(get_attribute(D({}), "a"), "b")); }, "'dict object' has no attribute 'a'");
  // {{ [1][3].b }} raises
  expect_error([&] { (void)(get_attribute(get_item(L({I(1)}), I(3)), "b")); }, "list object has no element 3");
  // {{ none.a.b }} raises
  expect_error([&] { (void)(get_attribute(get_attribute(N(), "a"), "b")); }, "'None' has no attribute 'a'");
  // {{ ([]|first).x }} raises
  expect_error([&] { (void)(get_attribute(filter("first", L({})), "x")); }, "No first item, sequence was empty.");
  // {{ 's'.nope.x }} raises
  expect_error([&] { (void)(get_attribute(get_attribute(S("s"), "nope"), "x")); }, "'str object' has no attribute 'nope'");
  // {{ [1].append.x }} raises
  expect_error([&] { (void)(get_attribute(get_attribute(L({I(1)}), "append"), "x")); }, "access to attribute 'append' of 'list' object is unsafe.");
}
