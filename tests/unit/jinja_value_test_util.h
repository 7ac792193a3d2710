// Shorthands for the Jinja value/builtins tests: build Python-like values and
// call filters, tests and methods as a template would.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "corvid/template/jinja_builtins.h"

namespace corvid::jinja::testing {

using corvid::jinja::CallArgs;
using corvid::jinja::get_attribute;
using corvid::jinja::get_item;
using corvid::jinja::get_slice;
using corvid::jinja::Object;
using corvid::jinja::Value;
using Kw = std::vector<std::pair<std::string, Value>>;

inline Value S(std::string s) { return Value(std::move(s)); }
inline Value I(std::int64_t i) { return Value(i); }
inline Value Fl(double d) { return Value(d); }
inline Value B(bool b) { return Value(b); }
inline Value N() { return Value::none(); }
inline Value U() { return Value::undefined("x"); }
inline Value L(std::vector<Value> items) { return Value::array(std::move(items)); }
inline Value D(Kw entries) {
  auto object = std::make_shared<Object>();
  for (auto& [key, value] : entries) object->set(key, std::move(value));
  return Value::object(object);
}

inline Value filter(std::string_view name, const Value& target, std::vector<Value> args = {}, Kw kw = {}) {
  return corvid::jinja::apply_filter(name, target, CallArgs{std::move(args), std::move(kw)});
}

inline bool test(std::string_view name, const Value& target, std::vector<Value> args = {}) {
  return corvid::jinja::apply_test(name, target, CallArgs{std::move(args), {}});
}

// obj.name(args): calling an Undefined fails with its message, as jinja2's does.
inline Value method(const Value& obj, std::string_view name, std::vector<Value> args = {}, Kw kw = {}) {
  const Value m = get_attribute(obj, name);
  if (!m.is_function()) throw corvid::Error(m.undefined_message());
  return m.as_function()(CallArgs{std::move(args), std::move(kw)});
}

template <class F>
inline void expect_error(F f, const std::string& message) {
  try {
    f();
    ADD_FAILURE() << "no error; expected: " << message;
  } catch (const corvid::Error& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
}

}  // namespace corvid::jinja::testing
