// The values a chat template computes with, following Python's semantics
// (jinja2 runs on Python objects): None, bool, int, float, str, list, dict,
// plus jinja2's Undefined, callables (macros, globals, bound methods) and
// namespace() objects. Lists and dicts are shared by reference, as in Python;
// the sandbox is immutable (transformers uses ImmutableSandboxedEnvironment),
// so only namespace objects are ever modified after creation.
//
// Ownership: jinja_value.{h,cc} and jinja_builtins.{h,cc} implement values,
// Python str()/repr(), JSON conversion, filters, tests and methods; the
// lexer/parser/evaluator (jinja_parser.*, jinja_eval.*, jinja.cc) use them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "corvid/template/jinja.h"

namespace corvid::jinja {

class Value;

// Arguments of a call: f(a, b, key=c).
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // The keyword argument `name`, else positional[index], else nullptr.
  const Value* get(std::string_view name, std::size_t index) const;
};

using Function = std::function<Value(const CallArgs&)>;

// A dict with Python's insertion order. Keys are stored as text (dict_key below): a
// string as itself, any other hashable key (None, bool, int, float) in a typed form, so
// that `{0: "a"}` keeps an int key and 1, 1.0 and True are one key, as in Python.
struct Object {
  std::vector<std::pair<std::string, std::shared_ptr<Value>>> entries;
  bool is_namespace = false;  // namespace(): attributes may be assigned with {% set ns.x = ... %}
  const Value* find(std::string_view key) const;  // key as dict_key gives it
  void set(const std::string& key, Value value);  // replaces in place (the first key stays) or appends
};

// A dict key as Object stores it. Strings are themselves; None, bool, int and float
// are "\xff", a type letter, then Python's equality class: the integer's decimal text
// for bools, ints and integral floats (so 1, 1.0 and True match), else the float's repr.
// A string that itself starts with 0xff (not UTF-8, but a template may hold any bytes)
// is stored as "\xffs" + the string, so no string can pass for a typed key. Lists, dicts
// and the rest are unhashable: a TypeError as in Python.
std::string dict_key(const Value& key);
// The stored key as the value the template sees (the type it was first inserted with).
Value dict_key_value(const std::string& stored);
// The key as Python's json.dumps writes it: a string as itself, None "null", True
// "true", 1 "1", 1.5 "1.5".
std::string dict_key_json_text(const std::string& stored);
// Whether two stored keys are one Python key.
bool same_dict_key(std::string_view a, std::string_view b);
// sorted()'s order of stored keys as pprint and tojson(sort_keys) need it: numbers by
// value, strings by code point; None, then numbers, then strings where types differ
// (pprint's fallback order by type name).
bool dict_key_less(const std::string& a, const std::string& b);
// Whether a stored key is a string (not a typed key).
inline bool is_string_key(std::string_view stored) {
  return stored.empty() || stored[0] != '\xff' || (stored.size() > 1 && stored[1] == 's');
}

class Value {
 public:
  // GCC's -Wshadow flags scoped enumerators named like the namespace-level
  // Object/Function types although they cannot clash (they are only reached as Kind::X).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
  enum class Kind { Undefined, None, Bool, Int, Float, String, Array, Object, Function };
#pragma GCC diagnostic pop

  Value() = default;  // Undefined
  static Value undefined(std::string name = {});  // name is kept for error messages
  // The Undefined that obj.key / obj[key] yields when the member is missing;
  // its message is jinja2's ("'dict object' has no attribute 'x'").
  static Value undefined_member(const Value& obj, const Value& key);
  // An Undefined whose use fails with exactly `message` (jinja2's hint, e.g.
  // "No first item, sequence was empty.", or the sandbox's refusal
  // "access to attribute 'append' of 'list' object is unsafe.").
  static Value undefined_with_message(std::string message);
  static Value none();
  Value(bool b);
  Value(int v) : Value(static_cast<std::int64_t>(v)) {}
  Value(std::int64_t i);
  Value(double d);
  Value(std::string s);
  Value(const char* s) : Value(std::string(s)) {}
  static Value array(std::vector<Value> items);
  // Other Python sequences that templates meet, all Kind::Array so that they
  // iterate like lists, but printing, ==, len() and tojson follow Python:
  //   tuple: (1, 2) literals, dict.items() pairs, str.partition();
  //   iterator: what jinja2's map/select/reject/items/unique/batch/slice filters
  //     return (generators): always true, no len(), no indexing, not JSON
  //     serializable; type_name is e.g. "generator" or "list_reverseiterator";
  //   view: dict.keys()/values()/items() ("dict_items([...])"): len() and `in`
  //     work, indexing and tojson do not.
  static Value tuple(std::vector<Value> items);
  // A namedtuple: a tuple whose attributes name its items (see get_attribute);
  // only jinja2's groupby result, _GroupTuple(grouper, list), is one.
  static Value named_tuple(std::vector<Value> items, std::string type_name);
  static Value iterator(std::vector<Value> items, std::string type_name = "generator");
  static Value view(std::vector<Value> items, std::string type_name);
  // jinja2's Markup (from |safe, |escape): a str that `+`/`~` with a plain str
  // HTML-escape the plain operand. Kind::String.
  static Value markup(std::string s);
  static Value object(std::shared_ptr<Object> object);
  static Value function(std::string name, Function f);

  static Value from_json(const Json& j);
  Json to_json() const;  // Undefined -> null; a Function is an error

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float; }  // bool excluded
  bool is_string() const { return kind_ == Kind::String; }
  bool is_array() const { return kind_ == Kind::Array; }
  bool is_object() const { return kind_ == Kind::Object; }
  bool is_function() const { return kind_ == Kind::Function; }
  bool is_list() const { return kind_ == Kind::Array && flavor_ == Flavor::List; }
  bool is_tuple() const { return kind_ == Kind::Array && flavor_ == Flavor::Tuple; }
  bool is_iterator() const { return kind_ == Kind::Array && flavor_ == Flavor::Iterator; }
  bool is_view() const { return kind_ == Kind::Array && flavor_ == Flavor::View; }
  bool is_markup() const { return kind_ == Kind::String && markup_; }
  // Python len() exists: str, list, tuple, dict, view (not an iterator).
  bool has_len() const;

  bool as_bool() const { return b_; }
  std::int64_t as_int() const { return i_; }
  double as_float() const { return kind_ == Kind::Int ? static_cast<double>(i_) : d_; }
  const std::string& as_string() const { return *s_; }
  const std::vector<Value>& as_array() const { return *a_; }
  const Object& as_object() const { return *o_; }
  Object& mutable_object() const { return *o_; }  // namespace assignment only
  const Function& as_function() const { return *f_; }
  const std::string& name() const { return name_; }  // Undefined's variable or Function's name
  // jinja2's UndefinedError text for using this Undefined: "'x' is undefined",
  // "'dict object' has no attribute 'x'", "list object has no element 3".
  std::string undefined_message() const;

  bool truthy() const;            // Python bool(): "", [], {}, 0, None, Undefined are false
  std::string str() const;        // Python str(): what {{ x }} prints (Undefined prints "")
  std::string repr() const;       // Python repr(): 'text', [1, 'a'], {'k': None}, True
  std::string type_name() const;  // Python type name for messages: 'str', 'dict', 'NoneType', ...

  // Python ==; 1 == 1.0 == True.
  friend bool operator==(const Value& a, const Value& b);
  // Python <, for sort and comparisons; mismatched types throw Error
  // ("'<' not supported between instances of 'str' and 'int'").
  static bool less(const Value& a, const Value& b);

 private:
  Kind kind_ = Kind::Undefined;
  bool b_ = false;
  std::int64_t i_ = 0;
  double d_ = 0;
  std::shared_ptr<const std::string> s_;
  std::shared_ptr<const std::vector<Value>> a_;
  std::shared_ptr<Object> o_;
  std::shared_ptr<const Function> f_;
  std::string name_;
  std::string undefined_hint_;  // set by undefined_member
  enum class Flavor : std::uint8_t { List, Tuple, Iterator, View };
  Flavor flavor_ = Flavor::List;  // for Kind::Array
  bool markup_ = false;           // for Kind::String
  // Nesting of lists/dicts below this value (namespaces count 1). Bounded by
  // kMaxNesting so that repr, ==, JSON and destruction recurse boundedly.
  std::uint32_t depth_ = 0;
};

// Deepest list/dict nesting a value may have (Python's recursion limit is 1000).
inline constexpr std::uint32_t kMaxNesting = 1000;

// Python's repr() of a float: shortest round-trip digits, "1.0", "1e+20", "inf".
std::string python_float_repr(double d);
// Python's repr() of a str: quotes chosen as Python does, escapes for
// backslash, control and non-printable characters.
std::string python_string_repr(std::string_view s);

}  // namespace corvid::jinja
