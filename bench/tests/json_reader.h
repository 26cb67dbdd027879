// A minimal strict JSON reader for the bench tests (objects, arrays,
// strings, numbers, null, bools): enough to hold `moegrad bench --json` to
// its schema without a JSON library.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace moegrad::bench::test {

struct Json;
using JsonObject = std::map<std::string, Json>;
using JsonArray = std::vector<Json>;
struct Json {
  std::variant<std::nullptr_t, bool, double, std::string, std::shared_ptr<JsonArray>, std::shared_ptr<JsonObject>> v;
  bool is_null() const { return std::holds_alternative<std::nullptr_t>(v); }
  bool is_number() const { return std::holds_alternative<double>(v); }
  bool is_string() const { return std::holds_alternative<std::string>(v); }
  double number() const { return std::get<double>(v); }
  const std::string& string() const { return std::get<std::string>(v); }
  const JsonArray* array() const {
    auto* p = std::get_if<std::shared_ptr<JsonArray>>(&v);
    return p ? p->get() : nullptr;
  }
  const JsonObject* object() const {
    auto* p = std::get_if<std::shared_ptr<JsonObject>>(&v);
    return p ? p->get() : nullptr;
  }
};

class JsonParser {
 public:
  explicit JsonParser(const std::string& text) : s_(text) {}
  // The whole text must be one value (surrounding whitespace allowed).
  bool parse(Json* out) {
    if (!value(out)) return false;
    ws();
    return i_ == s_.size();
  }

 private:
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  bool literal(const char* word) {
    const std::string w(word);
    if (s_.compare(i_, w.size(), w) != 0) return false;
    i_ += w.size();
    return true;
  }
  bool string(std::string* out) {
    if (s_[i_] != '"') return false;
    for (++i_; i_ < s_.size(); ++i_) {
      const char c = s_[i_];
      if (c == '"') {
        ++i_;
        return true;
      }
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c == '\\') {
        if (++i_ >= s_.size()) return false;
        const char e = s_[i_];
        if (e == 'u') {
          if (i_ + 4 >= s_.size()) return false;
          out->push_back('?');
          i_ += 4;
        } else if (std::string("\"\\/bfnrt").find(e) != std::string::npos) {
          out->push_back(e);
        } else {
          return false;
        }
      } else {
        out->push_back(c);
      }
    }
    return false;
  }
  // After an opening bracket: items separated by commas up to `close`
  // (possibly none). item() parses one and returns false on error.
  template <class Item>
  bool sequence(char close, Item item) {
    ++i_;
    ws();
    if (i_ < s_.size() && s_[i_] == close) {
      ++i_;
      return true;
    }
    for (;;) {
      if (!item()) return false;
      ws();
      if (i_ >= s_.size()) return false;
      const char sep = s_[i_++];
      if (sep == close) return true;
      if (sep != ',') return false;
    }
  }
  bool value(Json* out) {
    ws();
    if (i_ >= s_.size()) return false;
    const char c = s_[i_];
    if (c == 'n') return literal("null") && (out->v = nullptr, true);
    if (c == 't') return literal("true") && (out->v = true, true);
    if (c == 'f') return literal("false") && (out->v = false, true);
    if (c == '"') {
      std::string str;
      if (!string(&str)) return false;
      out->v = std::move(str);
      return true;
    }
    if (c == '[') {
      auto arr = std::make_shared<JsonArray>();
      out->v = arr;
      return sequence(']', [&] {
        Json item;
        if (!value(&item)) return false;
        arr->push_back(std::move(item));
        return true;
      });
    }
    if (c == '{') {
      auto obj = std::make_shared<JsonObject>();
      out->v = obj;
      return sequence('}', [&] {
        ws();
        std::string key;
        if (i_ >= s_.size() || !string(&key)) return false;
        ws();
        if (i_ >= s_.size() || s_[i_++] != ':') return false;
        Json item;
        if (!value(&item)) return false;
        return obj->emplace(key, std::move(item)).second;  // no duplicate keys
      });
    }
    // number: -?digits[.digits][e[+-]digits]
    const size_t start = i_;
    if (s_[i_] == '-') ++i_;
    auto digits = [&] {
      const size_t d = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      return i_ > d;
    };
    if (!digits()) return false;
    if (i_ < s_.size() && s_[i_] == '.' && (++i_, !digits())) return false;
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (!digits()) return false;
    }
    out->v = std::stod(s_.substr(start, i_ - start));
    return true;
  }

  const std::string& s_;
  size_t i_ = 0;
};

}  // namespace moegrad::bench::test
