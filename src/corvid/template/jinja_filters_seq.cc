// jinja2's filters over sequences: select/reject(attr), map, min/max, sort,
// dictsort, unique, batch, slice.
#include <algorithm>

#include "corvid/template/jinja_builtins.h"
#include "corvid/template/jinja_builtins_internal.h"
#include "corvid/template/jinja_unicode.h"

namespace corvid::jinja::detail {
namespace {

// sort/min/max/unique's key: attribute lookup then, by default, lowercasing.
Value sort_key(const Value& item, const Value* attribute, bool case_sensitive, bool multi) {
  auto post = [&](const Value& v) { return case_sensitive ? v : ignore_case(v); };
  if (!attribute || attribute->is_none()) return post(item);
  if (multi && attribute->is_string() && attribute->as_string().find(',') != std::string::npos) {
    std::vector<Value> keys;
    const Value comma(",");
    for (const std::string& part : detail::split(attribute->as_string(), &comma, -1, false)) {
      keys.push_back(post(detail::lookup_attribute_path(item, Value(part))));
    }
    return Value::array(std::move(keys));
  }
  return post(detail::lookup_attribute_path(item, *attribute));
}

using Keyed = std::vector<std::pair<Value, Value>>;

// CPython's list.sort(key=..., reverse=...): for fewer than 64 items it is a
// run count plus binary insertion sort, reproduced here comparison for
// comparison so that an unorderable pair fails with the pair Python meets
// first. Longer lists use std::stable_sort (same result; an error may name
// another pair). reverse: reversed, sorted stably, reversed back.
void python_sort(Keyed& keyed, bool reverse) {
  if (reverse) std::reverse(keyed.begin(), keyed.end());
  auto lt = [](const Keyed::value_type& a, const Keyed::value_type& b) { return Value::less(a.first, b.first); };
  const std::size_t n = keyed.size();
  if (n >= 64) {
    std::stable_sort(keyed.begin(), keyed.end(), lt);
  } else if (n > 1) {
    std::size_t run = 2;  // count_run
    if (lt(keyed[1], keyed[0])) {
      while (run < n && lt(keyed[run], keyed[run - 1])) ++run;
      std::reverse(keyed.begin(), keyed.begin() + static_cast<std::ptrdiff_t>(run));
    } else {
      while (run < n && !lt(keyed[run], keyed[run - 1])) ++run;
    }
    for (std::size_t start = run; start < n; ++start) {  // binarysort
      std::size_t l = 0;
      std::size_t r = start;
      do {
        const std::size_t p = l + ((r - l) >> 1);
        if (lt(keyed[start], keyed[p])) {
          r = p;
        } else {
          l = p + 1;
        }
      } while (l < r);
      std::rotate(keyed.begin() + static_cast<std::ptrdiff_t>(l), keyed.begin() + static_cast<std::ptrdiff_t>(start),
                  keyed.begin() + static_cast<std::ptrdiff_t>(start) + 1);
    }
  }
  if (reverse) std::reverse(keyed.begin(), keyed.end());
}

void check_hashable(const Value& v) {
  if (v.is_list() || (v.is_object() && !v.as_object().is_namespace)) {
    fail("unhashable type: '", v.type_name(), "'");
  }
}

}  // namespace

// jinja2's select/reject/selectattr/rejectattr.
Value select_items(const Value& target, const CallArgs& args, bool keep_when, bool by_attribute) {
  std::vector<Value> out;
  if (!target.truthy()) return generator({});
  std::size_t offset = 0;
  Value attribute;
  if (by_attribute) {
    if (args.positional.empty()) fail("Missing parameter for attribute name");
    attribute = args.positional[0];
    offset = 1;
  }
  const bool has_test = args.positional.size() > offset;
  CallArgs test_args;
  if (has_test) {
    test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(offset) + 1, args.positional.end());
    test_args.keyword = args.keyword;
  }
  for (const Value& item : iterate(target)) {
    const Value subject = by_attribute ? detail::lookup_attribute_path(item, attribute) : item;
    const bool passed = has_test ? apply_test(args.positional[offset].str(), subject, test_args) : subject.truthy();
    if (passed == keep_when) out.push_back(item);
  }
  return generator(std::move(out));
}

Value map_items(const Value& target, const CallArgs& args) {
  std::vector<Value> out;
  if (!target.truthy()) return generator({});
  if (args.positional.empty()) {
    const Value* attribute = args.get("attribute", 99);
    if (!attribute) fail("map requires a filter argument");
    const Value* fallback = args.get("default", 99);
    for (const auto& [key, value] : args.keyword) {
      if (key != "attribute" && key != "default") fail("Unexpected keyword argument ", python_string_repr(key));
    }
    for (const Value& item : iterate(target)) {
      Value v = detail::lookup_attribute_path(item, *attribute);
      if (fallback && !fallback->is_none() && v.is_undefined()) v = *fallback;
      out.push_back(v);
    }
    return generator(std::move(out));
  }
  const std::string filter = args.positional[0].str();
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : iterate(target)) out.push_back(apply_filter(filter, item, rest));
  return generator(std::move(out));
}

Value min_or_max(const Value& target, const CallArgs& args, bool want_max) {
  const std::vector<Value> items = iterate(target);
  if (items.empty()) return Value::undefined_with_message("No aggregated item, sequence was empty.");
  const bool case_sensitive = bool_param(args, "case_sensitive", 0, false);
  const Value* attribute = optional_arg(args, "attribute", 1);
  std::size_t best = 0;
  Value best_key = sort_key(items[0], attribute, case_sensitive, false);
  for (std::size_t i = 1; i < items.size(); ++i) {
    Value key = sort_key(items[i], attribute, case_sensitive, false);
    // CPython's max/min test item > best / item < best.
    if (detail::compare(want_max ? ">" : "<", key, best_key)) best = i, best_key = std::move(key);
  }
  return items[best];
}

Value do_sort(const Value& v, const CallArgs& args) {
  std::vector<Value> items = iterate(v);
  const bool reverse = bool_param(args, "reverse", 0, false);
  const bool case_sensitive = bool_param(args, "case_sensitive", 1, false);
  const Value* attribute = optional_arg(args, "attribute", 2);
  std::vector<std::pair<Value, Value>> keyed;
  // jinja2's multi-attrgetter makes every key a list, so equal keys never
  // reach `<` (None items sort without a TypeError).
  for (Value& item : items) {
    Value key = sort_key(item, attribute, case_sensitive, true);
    if (!key.is_array() || !(attribute && attribute->is_string() && attribute->as_string().find(',') != std::string::npos)) {
      key = Value::array({key});
    }
    keyed.emplace_back(std::move(key), item);
  }
  python_sort(keyed, reverse);
  std::vector<Value> out;
  for (auto& [key, item] : keyed) out.push_back(std::move(item));
  return Value::array(std::move(out));
}

Value do_dictsort(const Value& v, const CallArgs& args) {
  if (v.is_undefined()) fail(v.undefined_message());  // Undefined.items raises
  if (!v.is_object() || v.as_object().is_namespace) fail("'", v.type_name(), "' object has no attribute 'items'");
  const bool case_sensitive = bool_param(args, "case_sensitive", 0, false);
  const Value* by = optional_arg(args, "by", 1);
  const std::string by_text = by ? by->str() : "key";
  if (by_text != "key" && by_text != "value") fail("You can only sort by either \"key\" or \"value\"");
  const bool reverse = bool_param(args, "reverse", 2, false);
  std::vector<std::pair<Value, Value>> keyed;
  for (const auto& [key, value] : v.as_object().entries) {
    const Value k = by_text == "key" ? dict_key_value(key) : *value;
    keyed.emplace_back(case_sensitive ? k : ignore_case(k), tuple_pair(key, *value));
  }
  python_sort(keyed, reverse);
  std::vector<Value> out;
  for (auto& [key, item] : keyed) out.push_back(std::move(item));
  return Value::array(std::move(out));
}

Value do_unique(const Value& v, const CallArgs& args) {
  const bool case_sensitive = bool_param(args, "case_sensitive", 0, false);
  const Value* attribute = optional_arg(args, "attribute", 1);
  std::vector<Value> seen;
  std::vector<Value> out;
  for (const Value& item : iterate(v)) {
    const Value key = sort_key(item, attribute, case_sensitive, false);
    check_hashable(key);
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return generator(std::move(out));
}

Value do_groupby(const Value& v, const CallArgs& args) {
  const Value* attribute = optional_arg(args, "attribute", 0);
  if (!attribute) fail("sync_do_groupby() missing 1 required positional argument: 'attribute'");
  const Value* fallback = optional_arg(args, "default", 1);
  if (fallback && fallback->is_none()) fallback = nullptr;
  const bool case_sensitive = bool_param(args, "case_sensitive", 2, false);
  auto group_key = [&](const Value& item) {  // make_attrgetter with default, per path step
    Value key = item;
    const Value dot(".");
    std::vector<Value> parts;
    if (attribute->is_string()) {
      for (const std::string& part : split(attribute->as_string(), &dot, -1, false)) parts.emplace_back(part);
    } else {
      parts.push_back(*attribute);
    }
    for (const Value& part : parts) {
      key = lookup_attribute_path(key, part);
      if (fallback && key.is_undefined()) key = *fallback;
    }
    return key;
  };
  Keyed keyed;
  for (const Value& item : iterate(v)) {
    const Value key = group_key(item);
    keyed.emplace_back(case_sensitive ? key : ignore_case(key), item);
  }
  python_sort(keyed, false);
  std::vector<Value> groups;
  for (std::size_t i = 0; i < keyed.size();) {
    std::size_t j = i + 1;
    while (j < keyed.size() && keyed[j].first == keyed[i].first) ++j;
    std::vector<Value> members;
    for (std::size_t k = i; k < j; ++k) members.push_back(keyed[k].second);
    // The group shows the first member's own key, not its lowercased form.
    const Value grouper = case_sensitive ? keyed[i].first : group_key(members.front());
    groups.push_back(Value::named_tuple({grouper, Value::array(std::move(members))}, "_GroupTuple"));
    i = j;
  }
  return Value::array(std::move(groups));
}

Value do_batch_or_slice(const Value& v, const CallArgs& args, bool batch) {
  const std::vector<Value> items = iterate(v);
  const std::int64_t count = int_param(args, batch ? "linecount" : "slices", 0, 0);
  const Value* fill = optional_arg(args, "fill_with", 1);
  if (fill && fill->is_none()) fill = nullptr;
  std::vector<Value> out;
  if (batch) {
    if (count <= 0 && !items.empty()) fail("batch size must be positive");
    for (std::size_t i = 0; i < items.size(); i += static_cast<std::size_t>(count)) {
      std::vector<Value> group(items.begin() + static_cast<std::ptrdiff_t>(i),
                               items.begin() + static_cast<std::ptrdiff_t>(std::min(items.size(), i + static_cast<std::size_t>(count))));
      while (fill && static_cast<std::int64_t>(group.size()) < count) group.push_back(*fill);
      out.push_back(Value::array(std::move(group)));
    }
    return generator(std::move(out));
  }
  if (count <= 0) fail("integer division or modulo by zero");
  checked_width(count);
  const auto n = static_cast<std::int64_t>(items.size());
  const std::int64_t per = n / count;
  const std::int64_t extra = n % count;
  std::int64_t offset = 0;
  for (std::int64_t k = 0; k < count; ++k) {
    const std::int64_t start = offset + k * per;
    if (k < extra) ++offset;
    const std::int64_t end = offset + (k + 1) * per;
    std::vector<Value> group(items.begin() + start, items.begin() + end);
    if (fill && k >= extra) group.push_back(*fill);
    out.push_back(Value::array(std::move(group)));
  }
  return generator(std::move(out));
}


}  // namespace corvid::jinja::detail
