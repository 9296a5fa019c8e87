// The Graph IR parser: a hand-written lexer and a recursive-descent parser
// over the grammar in ir/parser.h. Every error is returned with the position
// of the token at fault; nothing here asserts on the text.
#include "ir/parser.h"

#include "ir/printer.h"

#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <variant>

namespace kiln {
namespace {

// ---- Lexer -------------------------------------------------------------------

enum class Tok : uint8_t {
  End,
  Error, // text holds the message
  Value, // %name, text holds the name (unquoted)
  GraphName,
  Ident,
  Number,
  String, // text holds the decoded contents
  LParen,
  RParen,
  LBrace,
  RBrace,
  LBracket,
  RBracket,
  Less,
  Greater,
  Comma,
  Equal,
  Colon,
  Arrow,
  Minus,
  Question,
  Star,
};

struct Token {
  Tok kind = Tok::End;
  std::string text;
  int64_t line = 1;
  int64_t col = 1;
};

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Lexer {
public:
  explicit Lexer(std::string_view src) : src_(src) {}

  Token next() {
    skipSpaceAndComments();
    Token t;
    t.line = line_;
    t.col = col_;
    if (atEnd()) return t;
    char c = src_[pos_];
    if (c == '%' || c == '@') return name(std::move(t), c == '%' ? Tok::Value : Tok::GraphName);
    if (c == '"') return string(std::move(t));
    if (isDigit(c) || (c == '-' && isDigit(peek(1)))) return number(std::move(t));
    if (isIdentStart(c)) {
      t.kind = Tok::Ident;
      while (!atEnd() && isIdentChar(src_[pos_])) t.text += take();
      return t;
    }
    if (c == '-' && peek(1) == '>') {
      take();
      take();
      t.kind = Tok::Arrow;
      t.text = "->";
      return t;
    }
    return punctuation(std::move(t), c);
  }

private:
  static bool isDigit(char c) { return c >= '0' && c <= '9'; }
  bool atEnd() const { return pos_ >= src_.size(); }
  char peek(size_t k) const { return pos_ + k < src_.size() ? src_[pos_ + k] : ' '; }
  char take() {
    char c = src_[pos_++];
    if (c == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    return c;
  }

  void skipSpaceAndComments() {
    while (!atEnd()) {
      char c = src_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        take();
      } else if (c == '/' && peek(1) == '/') {
        while (!atEnd() && src_[pos_] != '\n') take();
      } else {
        return;
      }
    }
  }

  static Token fail(Token t, std::string message) {
    t.kind = Tok::Error;
    t.text = std::move(message);
    return t;
  }

  Token name(Token t, Tok kind) {
    char sigil = take();
    if (!atEnd() && src_[pos_] == '"') {
      Token s = string(std::move(t));
      if (s.kind == Tok::String) s.kind = kind;
      return s;
    }
    t.kind = kind;
    while (!atEnd() && isNameChar(src_[pos_])) t.text += take();
    if (t.text.empty()) return fail(std::move(t), strCat("expected a name after '", sigil, "'"));
    return t;
  }

  Token string(Token t) {
    take(); // the opening quote
    t.kind = Tok::String;
    for (;;) {
      // Plain runs are copied at once: hex tensor data can be megabytes.
      size_t end = pos_;
      while (end < src_.size() && src_[end] != '"' && src_[end] != '\\' && src_[end] != '\n') ++end;
      t.text.append(src_.substr(pos_, end - pos_));
      col_ += static_cast<int64_t>(end - pos_);
      pos_ = end;
      if (atEnd() || src_[pos_] == '\n') return fail(std::move(t), "unterminated string");
      if (take() == '"') return t;
      char e = atEnd() ? '\0' : take();
      switch (e) {
      case '"':
        t.text += '"';
        break;
      case '\\':
        t.text += '\\';
        break;
      case 'n':
        t.text += '\n';
        break;
      case 't':
        t.text += '\t';
        break;
      case 'r':
        t.text += '\r';
        break;
      case 'x': {
        int hi = hexDigit(peek(0)), lo = hexDigit(peek(1));
        if (hi < 0 || lo < 0) return fail(std::move(t), "bad \\x escape in string");
        take();
        take();
        t.text += static_cast<char>(hi * 16 + lo);
        break;
      }
      default:
        return fail(std::move(t), "unknown escape in string");
      }
    }
  }

  // Numbers are lexed loosely ([-]digit then letters, digits, '.', and a sign
  // after an exponent) and checked when converted, so "1e-05", "0x7fc00000"
  // and "-3" are single tokens.
  Token number(Token t) {
    t.kind = Tok::Number;
    t.text += take();
    bool hex = false;
    while (!atEnd()) {
      char c = src_[pos_];
      bool afterExp = !hex && (t.text.back() == 'e' || t.text.back() == 'E');
      if (isIdentChar(c) && c != '$') {
        t.text += take();
        if (c == 'x' || c == 'X') hex = true;
      } else if ((c == '-' || c == '+') && afterExp) {
        t.text += take();
      } else {
        break;
      }
    }
    return t;
  }

  Token punctuation(Token t, char c) {
    static constexpr std::pair<char, Tok> kPunct[] = {
        {'(', Tok::LParen},   {')', Tok::RParen},   {'{', Tok::LBrace}, {'}', Tok::RBrace},
        {'[', Tok::LBracket}, {']', Tok::RBracket}, {'<', Tok::Less},   {'>', Tok::Greater},
        {',', Tok::Comma},    {'=', Tok::Equal},    {':', Tok::Colon},  {'-', Tok::Minus},
        {'?', Tok::Question}, {'*', Tok::Star}};
    for (auto [ch, kind] : kPunct)
      if (c == ch) {
        take();
        t.kind = kind;
        t.text = std::string(1, c);
        return t;
      }
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) return fail(std::move(t), strCat("unexpected character '", c, "'"));
    static const char kHex[] = "0123456789abcdef";
    return fail(std::move(t), strCat("unexpected byte 0x", kHex[u >> 4], kHex[u & 15]));
  }

  std::string_view src_;
  size_t pos_ = 0;
  int64_t line_ = 1;
  int64_t col_ = 1;
};

// ---- Scalars -----------------------------------------------------------------

// One element of a list or tensor literal, kept as text until the element
// type is known, so that each type converts (and rounds) exactly once.
struct Scalar {
  enum class Kind : uint8_t { Int, Float, String, Bool } kind = Kind::Int;
  std::string text;      // number text or string contents
  bool negative = false; // for -inf, -nan
  bool inf = false;      // inf or -inf
  bool nan = false;      // nan, -nan or nan(0xBITS)
  bool hasBits = false;  // nan(0xBITS)
  uint64_t bits = 0;
  bool boolean = false;
  int64_t line = 0, col = 0;
};

bool isIntegerText(std::string_view s) {
  size_t i = !s.empty() && s[0] == '-' ? 1 : 0;
  if (i == s.size()) return false;
  for (; i < s.size(); ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

template <class I> bool parseInteger(std::string_view s, I &out, int base = 10) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), out, base);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

// Bit layout of a floating-point element type, for NaN payloads.
struct FloatFormat {
  const char *name;
  int bits;
  uint64_t expMask, mantMask, canonicalNan;
};
constexpr FloatFormat kF16{"f16", 16, 0x7c00, 0x3ff, 0x7e00};
constexpr FloatFormat kBF16{"bf16", 16, 0x7f80, 0x7f, 0x7fc0};
constexpr FloatFormat kF32{"f32", 32, 0x7f800000, 0x7fffff, 0x7fc00000};
constexpr FloatFormat kF64{"f64", 64, 0x7ff0000000000000, 0xfffffffffffff, 0x7ff8000000000000};

// A converted scalar, or the message saying why it does not fit.
struct Bad {
  std::string message;
};
template <class T> using Converted = std::variant<T, Bad>;

Converted<uint64_t> nanBits(const Scalar &s, const FloatFormat &f) {
  uint64_t sign = uint64_t{1} << (f.bits - 1);
  if (!s.hasBits) return f.canonicalNan | (s.negative ? sign : 0);
  if (s.negative) return Bad{"a nan with bits takes its sign from the bits"};
  bool fits = f.bits == 64 || s.bits >> f.bits == 0;
  if (!fits || (s.bits & f.expMask) != f.expMask || (s.bits & f.mantMask) == 0)
    return Bad{strCat("nan(0x", std::hex, s.bits, ") is not a ", std::dec, f.bits, "-bit nan")};
  return s.bits;
}

// F is float or double; returns the IEEE bits of the value.
template <class F> Converted<F> toFloat(const Scalar &s) {
  constexpr const FloatFormat &format = sizeof(F) == 4 ? kF32 : kF64;
  using Bits = std::conditional_t<sizeof(F) == 4, uint32_t, uint64_t>;
  if (s.kind != Scalar::Kind::Int && s.kind != Scalar::Kind::Float) return Bad{"expected a number"};
  if (s.inf)
    return s.negative ? -std::numeric_limits<F>::infinity() : std::numeric_limits<F>::infinity();
  if (s.nan) {
    Converted<uint64_t> bits = nanBits(s, format);
    if (auto *bad = std::get_if<Bad>(&bits)) return *bad;
    return std::bit_cast<F>(static_cast<Bits>(std::get<uint64_t>(bits)));
  }
  F v{};
  auto r = std::from_chars(s.text.data(), s.text.data() + s.text.size(), v);
  if (r.ec == std::errc::result_out_of_range)
    return Bad{strCat("'", s.text, "' is out of range for ", format.name)};
  if (r.ec != std::errc() || r.ptr != s.text.data() + s.text.size())
    return Bad{strCat("'", s.text, "' is not a number")};
  return v;
}

template <class H> Converted<H> toHalf(const Scalar &s, const FloatFormat &format) {
  H h;
  if (s.nan) {
    Converted<uint64_t> bits = nanBits(s, format);
    if (auto *bad = std::get_if<Bad>(&bits)) return *bad;
    h.bits = static_cast<uint16_t>(std::get<uint64_t>(bits));
    return h;
  }
  Converted<float> f = toFloat<float>(s);
  if (auto *bad = std::get_if<Bad>(&f)) return *bad;
  h = H(std::get<float>(f));
  if (std::isfinite(std::get<float>(f)) && !std::isfinite(static_cast<float>(h)))
    return Bad{strCat("'", s.text, "' is out of range for ", format.name)};
  return h;
}

template <class I> Converted<I> toInteger(const Scalar &s) {
  if (s.kind != Scalar::Kind::Int) return Bad{"expected an integer"};
  using Wide = std::conditional_t<std::is_signed_v<I>, int64_t, uint64_t>;
  Wide w{};
  if (!parseInteger(s.text, w) || w < std::numeric_limits<I>::min() ||
      w > std::numeric_limits<I>::max())
    return Bad{strCat("integer '", s.text, "' is out of range")};
  return static_cast<I>(w);
}

// Converts a scalar to the C++ storage type of a tensor element.
template <class T> Converted<T> toElement(const Scalar &s) {
  if constexpr (std::is_same_v<T, std::string>) {
    if (s.kind != Scalar::Kind::String) return Bad{"expected a string"};
    return s.text;
  } else if constexpr (std::is_same_v<T, bool>) {
    if (s.kind == Scalar::Kind::Bool) return s.boolean;
    if (s.kind == Scalar::Kind::Int && (s.text == "0" || s.text == "1")) return s.text == "1";
    return Bad{"expected true or false"};
  } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    return toFloat<T>(s);
  } else if constexpr (std::is_same_v<T, Half>) {
    return toHalf<Half>(s, kF16);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return toHalf<BFloat16>(s, kBF16);
  } else {
    return toInteger<T>(s);
  }
}

// ---- Parser ------------------------------------------------------------------

class Parser {
public:
  Parser(std::string_view text, std::string_view file) : lexer_(text), file_(file) { advance(); }

  Expected<Model> model() {
    Model m;
    if (atIdent("kiln.model")) {
      advance();
      KILN_RETURN_IF_ERROR(header(m));
    }
    KILN_RETURN_IF_ERROR(graph(*m.graph, 0));
    if (!at(Tok::End)) return error("expected end of input after the main graph, found " + found());
    return m;
  }

private:
  using Scope = std::unordered_map<std::string, Value *>;

  // ---- Tokens ----

  void advance() { tok_ = lexer_.next(); }
  bool at(Tok k) const { return tok_.kind == k; }
  bool atIdent(std::string_view s) const { return tok_.kind == Tok::Ident && tok_.text == s; }

  std::string found() const {
    switch (tok_.kind) {
    case Tok::End:
      return "end of input";
    case Tok::String:
      return "a string";
    case Tok::Value:
      return "'%" + tok_.text + "'";
    case Tok::GraphName:
      return "'@" + tok_.text + "'";
    default:
      return "'" + tok_.text + "'";
    }
  }

  // A lexer error at the current token wins over what the parser expected.
  Error errorAt(int64_t line, int64_t col, const std::string &message) const {
    return makeError(file_, ":", line, ":", col, ": ", message);
  }
  Error error(const std::string &message) const {
    return errorAt(tok_.line, tok_.col, at(Tok::Error) ? tok_.text : message);
  }
  Error errorAt(const Token &t, const std::string &message) const {
    return errorAt(t.line, t.col, message);
  }

  Status expect(Tok kind, std::string_view what) {
    if (!at(kind)) return error(strCat("expected ", what, ", found ", found()));
    advance();
    return Status::success();
  }
  Status expectIdent(std::string_view keyword) {
    if (!atIdent(keyword)) return error(strCat("expected '", keyword, "', found ", found()));
    advance();
    return Status::success();
  }
  // Consumes a token of the given kind and returns its text.
  Expected<std::string> take(Tok kind, std::string_view what) {
    if (!at(kind)) return error(strCat("expected ", what, ", found ", found()));
    std::string text = std::move(tok_.text);
    advance();
    return text;
  }
  // Parses `item` repeatedly, separated by commas, up to the closing token.
  template <class F> Status commaList(Tok close, std::string_view closeText, F &&item) {
    if (!at(close)) {
      for (;;) {
        KILN_RETURN_IF_ERROR(item());
        if (!at(Tok::Comma)) break;
        advance();
      }
    }
    return expect(close, strCat("',' or '", closeText, "'"));
  }

  // ---- Scopes ----

  Value *lookup(const std::string &name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto found = it->find(name);
      if (found != it->end()) return found->second;
    }
    return nullptr;
  }
  Status checkFresh(const Token &t) const {
    if (lookup(t.text)) return errorAt(t, "value %" + t.text + " is already defined");
    return Status::success();
  }
  Expected<Value *> use(const Token &t) const {
    Value *v = lookup(t.text);
    if (!v) return errorAt(t, "use of undefined value %" + t.text);
    return v;
  }

  // ---- Model and graphs ----

  Status header(Model &m) {
    for (;;) {
      if (atIdent("opsets")) {
        advance();
        KILN_RETURN_IF_ERROR(expect(Tok::LBrace, "'{'"));
        KILN_RETURN_IF_ERROR(commaList(Tok::RBrace, "}", [&]() -> Status {
          Token where = tok_;
          KILN_ASSIGN_OR_RETURN(std::string domain, take(Tok::String, "an opset domain string"));
          KILN_RETURN_IF_ERROR(expect(Tok::Equal, "'='"));
          KILN_ASSIGN_OR_RETURN(int64_t version, integer());
          if (!m.opsets.emplace(domain, version).second)
            return errorAt(where, "opset " + quoteString(domain) + " is given twice");
          return Status::success();
        }));
      } else if (atIdent("producer")) {
        advance();
        KILN_ASSIGN_OR_RETURN(m.producer, take(Tok::String, "a producer string"));
      } else {
        return Status::success();
      }
    }
  }

  Status graph(Graph &g, int depth) {
    if (depth > kMaxParseRegionDepth)
      return error(strCat("regions are nested more than ", kMaxParseRegionDepth, " deep"));
    KILN_RETURN_IF_ERROR(expectIdent("graph"));
    KILN_ASSIGN_OR_RETURN(std::string name, take(Tok::GraphName, "a graph name (@name)"));
    g.setName(std::move(name));
    scopes_.emplace_back();
    struct Pop {
      std::vector<Scope> &s;
      ~Pop() { s.pop_back(); }
    } pop{scopes_};

    KILN_RETURN_IF_ERROR(expect(Tok::LParen, "'('"));
    KILN_RETURN_IF_ERROR(commaList(Tok::RParen, ")", [&]() -> Status {
      Token t = tok_;
      KILN_RETURN_IF_ERROR(expect(Tok::Value, "an input (%name)"));
      KILN_RETURN_IF_ERROR(checkFresh(t));
      KILN_RETURN_IF_ERROR(expect(Tok::Colon, "':' and the input's type"));
      KILN_ASSIGN_OR_RETURN(Type type, parseType(0));
      scopes_.back()[t.text] = g.addInput(t.text, std::move(type));
      return Status::success();
    }));
    KILN_RETURN_IF_ERROR(expect(Tok::Arrow, "'->'"));
    KILN_RETURN_IF_ERROR(expect(Tok::LParen, "'('"));
    std::vector<Token> outputs;
    KILN_RETURN_IF_ERROR(commaList(Tok::RParen, ")", [&]() -> Status {
      outputs.push_back(tok_);
      return expect(Tok::Value, "an output (%name)");
    }));
    KILN_RETURN_IF_ERROR(expect(Tok::LBrace, "'{'"));
    while (!at(Tok::RBrace)) {
      if (at(Tok::End) || at(Tok::Error)) return error("expected a node or '}', found " + found());
      KILN_RETURN_IF_ERROR(node(g, depth));
    }
    advance();
    // Outputs are resolved last: they name values the body defines.
    std::vector<Value *> outs;
    for (const Token &t : outputs) {
      KILN_ASSIGN_OR_RETURN(Value * v, use(t));
      outs.push_back(v);
    }
    g.setOutputs(std::move(outs));
    return Status::success();
  }

  // ---- Nodes ----

  Expected<std::vector<Token>> results() {
    std::vector<Token> names;
    if (!at(Tok::Value)) return names;
    for (;;) {
      KILN_RETURN_IF_ERROR(checkFresh(tok_));
      for (const Token &t : names)
        if (t.text == tok_.text) return error("value %" + tok_.text + " is already defined");
      names.push_back(tok_);
      advance();
      if (!at(Tok::Comma)) break;
      advance();
      if (!at(Tok::Value)) return error("expected a result (%name), found " + found());
    }
    KILN_RETURN_IF_ERROR(expect(Tok::Equal, "'=' after the results"));
    return names;
  }

  Status node(Graph &g, int depth) {
    KILN_ASSIGN_OR_RETURN(std::vector<Token> outs, results());
    if (!at(Tok::Ident)) return error("expected an op name, found " + found());
    std::optional<OpKind> op = opFromName(tok_.text);
    if (!op) return error("unknown op '" + tok_.text + "'");
    advance();

    std::vector<Value *> inputs;
    KILN_RETURN_IF_ERROR(expect(Tok::LParen, "'('"));
    KILN_RETURN_IF_ERROR(commaList(Tok::RParen, ")", [&]() -> Status {
      if (atIdent("_")) {
        inputs.push_back(nullptr);
        advance();
        return Status::success();
      }
      Token t = tok_;
      KILN_RETURN_IF_ERROR(expect(Tok::Value, "an input (%name or _)"));
      KILN_ASSIGN_OR_RETURN(Value * v, use(t));
      inputs.push_back(v);
      return Status::success();
    }));

    std::map<std::string, Attribute> attrs;
    if (at(Tok::LBrace)) KILN_RETURN_IF_ERROR(attributes(opSchema(*op), g, depth, attrs));
    std::string name;
    if (atIdent("name")) {
      advance();
      KILN_ASSIGN_OR_RETURN(name, take(Tok::String, "the node name string"));
    }
    KILN_ASSIGN_OR_RETURN(std::vector<Type> types, resultTypes(outs.size()));

    Node *n = g.addNode(*op, std::move(inputs), static_cast<int>(outs.size()), std::move(name));
    for (auto &[attrName, a] : attrs) n->setAttr(attrName, std::move(a));
    for (size_t i = 0; i < outs.size(); ++i) {
      Value *v = n->output(static_cast<int>(i));
      v->setName(outs[i].text);
      v->setType(std::move(types[i]));
      scopes_.back()[outs[i].text] = v;
    }
    return Status::success();
  }

  Expected<std::vector<Type>> resultTypes(size_t count) {
    std::vector<Type> types;
    if (count == 0) {
      if (at(Tok::Colon)) return error("a node without results has no types");
      return types;
    }
    KILN_RETURN_IF_ERROR(expect(Tok::Colon, "':' and the result types"));
    for (size_t i = 0; i < count; ++i) {
      if (i)
        KILN_RETURN_IF_ERROR(
            expect(Tok::Comma, strCat("',' (", count, " results, ", count, " types)")));
      KILN_ASSIGN_OR_RETURN(Type t, parseType(0));
      types.push_back(std::move(t));
    }
    if (at(Tok::Comma)) return error(strCat("more types than the ", count, " results"));
    return types;
  }

  // ---- Attributes ----

  Status attributes(const OpSchema &schema, Graph &g, int depth,
                    std::map<std::string, Attribute> &attrs) {
    advance(); // '{'
    return commaList(Tok::RBrace, "}", [&]() -> Status {
      Token t = tok_;
      if (!at(Tok::Ident) && !at(Tok::String))
        return error("expected an attribute name, found " + found());
      advance();
      if (attrs.count(t.text)) return errorAt(t, "attribute '" + t.text + "' is given twice");
      KILN_RETURN_IF_ERROR(expect(Tok::Equal, "'='"));
      const AttrSpec *spec = schema.findAttr(t.text);
      std::optional<AttrKind> hint;
      if (spec) hint = spec->kind;
      KILN_ASSIGN_OR_RETURN(Attribute a, attributeValue(hint, g, depth));
      attrs.emplace(t.text, std::move(a));
      return Status::success();
    });
  }

  Expected<Attribute> attributeValue(std::optional<AttrKind> hint, Graph &g, int depth) {
    if (at(Tok::String)) {
      Attribute a = Attribute::ofString(std::move(tok_.text));
      advance();
      return a;
    }
    if (at(Tok::LBracket) || atIdent("ints") || atIdent("floats") || atIdent("strings"))
      return list(hint);
    if (atIdent("dense")) {
      KILN_ASSIGN_OR_RETURN(Tensor t, tensor());
      return Attribute::ofTensor(std::move(t));
    }
    if (atIdent("graph")) {
      auto region = std::make_shared<Graph>("", &g);
      KILN_RETURN_IF_ERROR(graph(*region, depth + 1));
      return Attribute::ofGraph(std::move(region));
    }
    if (at(Tok::Number) || at(Tok::Minus) || atIdent("inf") || atIdent("nan")) {
      KILN_ASSIGN_OR_RETURN(Scalar s, scalar());
      if (s.kind == Scalar::Kind::Int && hint != AttrKind::Float) {
        KILN_ASSIGN_OR_RETURN(int64_t v, convert<int64_t>(s));
        return Attribute::ofInt(v);
      }
      KILN_ASSIGN_OR_RETURN(float v, convert<float>(s));
      return Attribute::ofFloat(v);
    }
    if (at(Tok::Ident) && (atIdent("seq") || atIdent("opt") || dtypeFromName(tok_.text))) {
      KILN_ASSIGN_OR_RETURN(Type t, parseType(0));
      return Attribute::ofType(std::move(t));
    }
    if (at(Tok::Ident))
      return error("expected an attribute value, found " + found() + " (strings are quoted)");
    return error("expected an attribute value, found " + found());
  }

  Expected<Attribute> list(std::optional<AttrKind> hint) {
    std::optional<AttrKind> kind;
    if (at(Tok::Ident)) {
      kind = tok_.text == "ints"     ? AttrKind::Ints
             : tok_.text == "floats" ? AttrKind::Floats
                                     : AttrKind::Strings;
      advance();
    }
    Token open = tok_;
    KILN_ASSIGN_OR_RETURN(std::vector<Scalar> items, scalars());
    if (!kind) {
      bool anyString = false, anyFloat = false;
      for (const Scalar &s : items) {
        anyString |= s.kind == Scalar::Kind::String;
        anyFloat |= s.kind == Scalar::Kind::Float;
      }
      bool listHint =
          hint == AttrKind::Ints || hint == AttrKind::Floats || hint == AttrKind::Strings;
      if (items.empty() && !listHint)
        return errorAt(open, "cannot tell the kind of an empty list; write ints [], floats [] "
                             "or strings []");
      kind = anyString  ? AttrKind::Strings
             : anyFloat ? AttrKind::Floats
             : listHint ? *hint
                        : AttrKind::Ints;
    }
    Attribute a;
    a.kind = *kind;
    for (const Scalar &s : items) {
      if (a.kind == AttrKind::Ints) {
        KILN_ASSIGN_OR_RETURN(int64_t v, convert<int64_t>(s));
        a.ints.push_back(v);
      } else if (a.kind == AttrKind::Floats) {
        KILN_ASSIGN_OR_RETURN(float v, convert<float>(s));
        a.floats.push_back(v);
      } else {
        KILN_ASSIGN_OR_RETURN(std::string v, convert<std::string>(s));
        a.strings.push_back(std::move(v));
      }
    }
    return a;
  }

  // ---- Scalars and tensors ----

  template <class T> Expected<T> convert(const Scalar &s) const {
    Converted<T> c = toElement<T>(s);
    if (auto *bad = std::get_if<Bad>(&c)) return errorAt(s.line, s.col, bad->message);
    return std::move(std::get<T>(c));
  }

  Expected<int64_t> integer() {
    if (!at(Tok::Number)) return error("expected an integer, found " + found());
    KILN_ASSIGN_OR_RETURN(Scalar s, scalar());
    return convert<int64_t>(s);
  }

  Expected<Scalar> scalar() {
    Scalar s;
    s.line = tok_.line;
    s.col = tok_.col;
    if (at(Tok::String) || atIdent("true") || atIdent("false")) {
      s.kind = at(Tok::String) ? Scalar::Kind::String : Scalar::Kind::Bool;
      s.boolean = atIdent("true");
      s.text = std::move(tok_.text);
      advance();
      return s;
    }
    if (at(Tok::Minus)) {
      s.negative = true;
      advance();
      if (!atIdent("inf") && !atIdent("nan"))
        return error("expected inf or nan after '-', found " + found());
    }
    if (at(Tok::Number)) {
      s.kind = isIntegerText(tok_.text) ? Scalar::Kind::Int : Scalar::Kind::Float;
      s.text = std::move(tok_.text);
      advance();
      return s;
    }
    s.kind = Scalar::Kind::Float;
    if (atIdent("inf")) {
      s.inf = true;
      advance();
      return s;
    }
    if (!atIdent("nan")) return error("expected a number, string, true or false, found " + found());
    s.nan = true;
    advance();
    if (!at(Tok::LParen)) return s;
    advance();
    std::string_view text = tok_.text;
    if (!at(Tok::Number) || text.substr(0, 2) != "0x" || !parseInteger(text.substr(2), s.bits, 16))
      return error("expected the nan's bits as 0x<hex>, found " + found());
    s.hasBits = true;
    advance();
    KILN_RETURN_IF_ERROR(expect(Tok::RParen, "')'"));
    return s;
  }

  // '[' scalar, ... ']'
  Expected<std::vector<Scalar>> scalars() {
    std::vector<Scalar> items;
    KILN_RETURN_IF_ERROR(expect(Tok::LBracket, "'['"));
    KILN_RETURN_IF_ERROR(commaList(Tok::RBracket, "]", [&]() -> Status {
      KILN_ASSIGN_OR_RETURN(Scalar s, scalar());
      items.push_back(std::move(s));
      return Status::success();
    }));
    return items;
  }

  Expected<DType> dtype() {
    if (!at(Tok::Ident)) return error("expected an element type, found " + found());
    std::optional<DType> d = dtypeFromName(tok_.text);
    if (!d) return error("unknown element type '" + tok_.text + "'");
    advance();
    return *d;
  }

  // Elements of a tensor; capped so that products of dims cannot overflow.
  static constexpr int64_t kMaxElements = int64_t{1} << 48;

  Expected<Shape64> tensorShape() {
    Shape64 shape;
    int64_t numel = 1;
    KILN_RETURN_IF_ERROR(expect(Tok::LBracket, "'['"));
    KILN_RETURN_IF_ERROR(commaList(Tok::RBracket, "]", [&]() -> Status {
      Token t = tok_;
      KILN_ASSIGN_OR_RETURN(int64_t d, integer());
      if (d < 0) return errorAt(t, "tensor dimension " + t.text + " is negative");
      if (d > kMaxElements || (d && numel > kMaxElements / d))
        return errorAt(t, "tensor has too many elements");
      numel *= d;
      shape.push_back(d);
      return Status::success();
    }));
    return shape;
  }

  Expected<Tensor> tensor() {
    advance(); // 'dense'
    KILN_RETURN_IF_ERROR(expect(Tok::Less, "'<'"));
    if (atIdent("undefined")) {
      advance();
      KILN_RETURN_IF_ERROR(expect(Tok::Greater, "'>'"));
      return Tensor();
    }
    KILN_ASSIGN_OR_RETURN(DType dt, dtype());
    KILN_ASSIGN_OR_RETURN(Shape64 shape, tensorShape());
    KILN_RETURN_IF_ERROR(expect(Tok::Greater, "'>'"));
    int64_t numel = numelOf(shape);
    if (atIdent("hex")) {
      advance();
      return hexTensor(dt, std::move(shape), numel);
    }
    if (atIdent("elided"))
      return error("elided tensor data cannot be parsed; print without elideLargeConstants");
    Token open = tok_;
    KILN_ASSIGN_OR_RETURN(std::vector<Scalar> items, scalars());
    if (static_cast<int64_t>(items.size()) != numel)
      return errorAt(open, strCat("tensor data has ", items.size(), " elements, expected ", numel));
    // Allocated only now: the elements were read from the text.
    Tensor t(dt, std::move(shape));
    Status status = visitDType(dt, [&](auto tag) -> Status {
      using T = decltype(tag);
      T *data = t.data<T>();
      for (int64_t i = 0; i < numel; ++i) {
        KILN_ASSIGN_OR_RETURN(data[i], convert<T>(items[i]));
      }
      return Status::success();
    });
    KILN_RETURN_IF_ERROR(status);
    return t;
  }

  Expected<Tensor> hexTensor(DType dt, Shape64 shape, int64_t numel) {
    if (dt == DType::String) return error("string tensors cannot be written as hex");
    int64_t line = tok_.line, col = tok_.col; // not the token: it holds the data
    KILN_ASSIGN_OR_RETURN(std::string hex, take(Tok::String, "the hex data string"));
    size_t bytes = static_cast<size_t>(numel) * dtypeSize(dt); // numel <= 2^48
    if (hex.size() != 2 * bytes)
      return errorAt(line, col,
                     strCat("hex data has ", hex.size(), " digits, expected ", 2 * bytes));
    Tensor out(dt, std::move(shape));
    auto *p = static_cast<unsigned char *>(out.mutableRaw());
    // A table, not hexDigit(): this loop decodes every weight of a model.
    static const auto kDigit = [] {
      std::array<int8_t, 256> t;
      for (int c = 0; c < 256; ++c) t[c] = static_cast<int8_t>(hexDigit(static_cast<char>(c)));
      return t;
    }();
    int8_t bad = 0;
    for (size_t i = 0; i < bytes; ++i) {
      int8_t hi = kDigit[static_cast<unsigned char>(hex[2 * i])];
      int8_t lo = kDigit[static_cast<unsigned char>(hex[2 * i + 1])];
      bad |= hi | lo; // negative once any digit is not hex
      p[i] = static_cast<unsigned char>(hi * 16 + lo);
    }
    if (bad < 0) return errorAt(line, col, "hex data has a character that is not a hex digit");
    return out;
  }

  // ---- Types ----

  Expected<Type> parseType(int depth) {
    if (depth > kMaxTypeDepth)
      return error(strCat("types are nested more than ", kMaxTypeDepth, " deep"));
    if (atIdent("seq") || atIdent("opt")) {
      bool seq = atIdent("seq");
      advance();
      KILN_RETURN_IF_ERROR(expect(Tok::Less, "'<'"));
      KILN_ASSIGN_OR_RETURN(Type elem, parseType(depth + 1));
      KILN_RETURN_IF_ERROR(expect(Tok::Greater, "'>'"));
      return seq ? Type::sequence(std::move(elem)) : Type::optional(std::move(elem));
    }
    if (!at(Tok::Ident)) return error("expected a type, found " + found());
    KILN_ASSIGN_OR_RETURN(DType dt, dtype());
    KILN_RETURN_IF_ERROR(expect(Tok::LBracket, "'['"));
    if (at(Tok::Star)) {
      advance();
      KILN_RETURN_IF_ERROR(expect(Tok::RBracket, "']'"));
      return Type::tensor(dt, Shape::unranked());
    }
    std::vector<Dim> dims;
    KILN_RETURN_IF_ERROR(commaList(Tok::RBracket, "]", [&]() -> Status {
      KILN_ASSIGN_OR_RETURN(Dim d, dim());
      dims.push_back(std::move(d));
      return Status::success();
    }));
    return Type::tensor(dt, Shape(std::move(dims)));
  }

  Expected<Dim> dim() {
    if (at(Tok::Question)) {
      advance();
      return Dim::unknown();
    }
    if (at(Tok::Ident) || at(Tok::String)) {
      if (tok_.text.empty()) return error("a symbolic dimension needs a name");
      Dim d = Dim::symbol(std::move(tok_.text));
      advance();
      return d;
    }
    Token t = tok_;
    if (!at(Tok::Number))
      return error("expected a dimension (number, ?, or symbol), found " + found());
    KILN_ASSIGN_OR_RETURN(int64_t v, integer());
    if (v < 0) return errorAt(t, "dimension " + t.text + " is negative");
    return Dim(v);
  }

  Lexer lexer_;
  std::string file_;
  Token tok_;
  std::vector<Scope> scopes_;
};

} // namespace

Expected<Model> parseModel(std::string_view text, std::string_view fileNameForErrors) {
  return Parser(text, fileNameForErrors).model();
}

} // namespace kiln
