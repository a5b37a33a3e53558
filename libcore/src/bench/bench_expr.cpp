#include "shardtrain/bench/bench_expr.hpp"

#include <cctype>
#include <cstdlib>

#include "shardtrain/base/error.hpp"

namespace shardtrain::bench {
namespace {

// Recursive descent over the text: expr = term {(+|-) term}; term = factor {(*|/) factor};
// factor = number | name | -factor | (expr). With `values` null it only parses (and collects
// names); else it evaluates, and `missing` turns true on a name without a value or a zero divisor.
class Parser {
 public:
  Parser(const std::string& text, const std::map<std::string, double>* values) : text_(text), values_(values) {}

  double parse_all() {
    const double v = expr();
    skip();
    if (pos_ != text_.size()) fail("unexpected '" + text_.substr(pos_, 1) + "'");
    return v;
  }
  std::vector<std::string> names;
  bool missing = false;

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw UsageError("expression \"" + text_ + "\" at character " + std::to_string(pos_ + 1) + ": " + what);
  }
  void skip() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool take(char c) {
    skip();
    if (pos_ < text_.size() && text_[pos_] == c) return ++pos_, true;
    return false;
  }
  double expr() {
    double v = term();
    for (;;) {
      if (take('+')) v += term();
      else if (take('-')) v -= term();
      else return v;
    }
  }
  double term() {
    double v = factor();
    for (;;) {
      if (take('*')) {
        v *= factor();
      } else if (take('/')) {
        const double d = factor();
        if (d == 0) missing = true;
        v = d == 0 ? 0 : v / d;
      } else {
        return v;
      }
    }
  }
  double factor() {
    if (take('-')) return -factor();
    if (take('(')) {
      const double v = expr();
      if (!take(')')) fail("')' expected");
      return v;
    }
    skip();
    if (pos_ < text_.size() && (std::isdigit(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '.')) {
      char* end = nullptr;
      const double v = std::strtod(text_.c_str() + pos_, &end);
      pos_ = static_cast<std::size_t>(end - text_.c_str());
      return v;
    }
    const std::size_t start = pos_;
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) ++pos_;
    if (pos_ == start) fail(pos_ < text_.size() ? "unexpected '" + text_.substr(pos_, 1) + "'" : "a value expected");
    const std::string name = text_.substr(start, pos_ - start);
    names.push_back(name);
    if (!values_) return 1;
    const auto it = values_->find(name);
    if (it == values_->end()) return missing = true, 0;
    return it->second;
  }

  const std::string& text_;
  const std::map<std::string, double>* values_;
  std::size_t pos_ = 0;
};

}  // namespace

std::vector<std::string> expression_names(const std::string& expr) {
  Parser p(expr, nullptr);
  p.parse_all();
  return p.names;
}

std::optional<double> evaluate(const std::string& expr, const std::map<std::string, double>& values) {
  Parser p(expr, &values);
  const double v = p.parse_all();
  if (p.missing) return std::nullopt;
  return v;
}

}  // namespace shardtrain::bench
