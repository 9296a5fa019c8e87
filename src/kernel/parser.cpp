// The Kernel IR parser: a hand-written lexer and a recursive-descent parser
// over the grammar in kernel/parser.h, reporting errors the way the Graph IR
// parser does (ir/parser.cpp): at the position of the token at fault, with
// a lexer error winning over what the parser expected.
#include "kernel/parser.h"

#include "kernel/printer.h"
#include "kernel/verifier.h"

#include <charconv>
#include <limits>
#include <optional>
#include <unordered_map>

namespace kiln {
namespace {

using kir::Affine;
using kir::Inst;
using kir::Kernel;
using kir::Opcode;
using kir::Schedule;

// ---- Lexer -------------------------------------------------------------------

// Name (%name) and KernelName (@name) hold the name in text, Value (%N) and
// LoopVar (%iN) their number, Number its text as written, Error a message.
// clang-format off
enum class Tok : uint8_t {
  End, Error, Name, Value, LoopVar, KernelName, Ident, Number,
  LParen, RParen, LBrace, RBrace, LBracket, RBracket, Comma, Equal, Colon, Star, Plus, Minus
};
// clang-format on

struct Token {
  Tok kind = Tok::End;
  std::string text;
  int number = 0;
  int64_t line = 1, col = 1;
};

bool isDigit(char c) {
  return c >= '0' && c <= '9';
}
bool isIdStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool isIdChar(char c) {
  return isIdStart(c) || isDigit(c) || c == '.';
}

// Integers and floats alike (std::from_chars), the whole text or nothing.
template <class N> bool parseNumber(std::string_view s, N &out) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
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
    if (c == '%') return percent(std::move(t));
    if (c == '@') {
      take();
      t.kind = Tok::KernelName;
      t.text = word();
      if (!isKernelIrName(t.text)) return fail(std::move(t), "expected a kernel name after '@'");
      return t;
    }
    if (isDigit(c) || (c == '-' && isDigit(peek(1)))) return number(std::move(t));
    if (isIdStart(c)) {
      t.kind = Tok::Ident;
      t.text = word();
      return t;
    }
    return punctuation(std::move(t), c);
  }

private:
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
  std::string word() {
    std::string s;
    while (!atEnd() && isIdChar(src_[pos_])) s += take();
    return s;
  }

  void skipSpaceAndComments() {
    while (!atEnd()) {
      char c = src_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
        take();
      else if (c == '/' && peek(1) == '/')
        while (!atEnd() && src_[pos_] != '\n') take();
      else
        return;
    }
  }

  static Token fail(Token t, std::string message) {
    t.kind = Tok::Error;
    t.text = std::move(message);
    return t;
  }

  // %name, %N or %iN: one spelling each, so the printer's text is the only
  // text for a kernel (no %007 for %7).
  Token percent(Token t) {
    take();
    std::string w = word();
    if (w.empty()) return fail(std::move(t), "expected a name, value or loop variable after '%'");
    auto allDigits = [](std::string_view s) {
      for (char c : s)
        if (!isDigit(c)) return false;
      return !s.empty();
    };
    bool loopVar = w[0] == 'i' && allDigits(std::string_view(w).substr(1));
    if (!loopVar && !isDigit(w[0])) {
      t.kind = Tok::Name;
      t.text = std::move(w);
      return t;
    }
    std::string_view digits = std::string_view(w).substr(loopVar ? 1 : 0);
    t.text = "%" + w;
    t.kind = loopVar ? Tok::LoopVar : Tok::Value;
    if (!allDigits(digits))
      return fail(std::move(t), "'" + t.text + "' is not a name, value or loop variable");
    if (digits.size() > 1 && digits[0] == '0')
      return fail(std::move(t), "'" + t.text + "' has a leading zero");
    if (!parseNumber(digits, t.number) || t.number >= kMaxKernelNumbers)
      return fail(std::move(t), strCat("'", t.text, "' is too large (numbers are below ",
                                       kMaxKernelNumbers, ")"));
    return t;
  }

  // Numbers are lexed loosely (a digit, then identifier characters, and a
  // sign after an exponent) and checked when converted.
  Token number(Token t) {
    t.kind = Tok::Number;
    t.text += take();
    while (!atEnd()) {
      char c = src_[pos_];
      bool afterExp = t.text.back() == 'e' || t.text.back() == 'E';
      if (isIdChar(c) || ((c == '-' || c == '+') && afterExp))
        t.text += take();
      else
        break;
    }
    return t;
  }

  Token punctuation(Token t, char c) {
    static constexpr std::pair<char, Tok> kPunct[] = {
        {'(', Tok::LParen},   {')', Tok::RParen},   {'{', Tok::LBrace}, {'}', Tok::RBrace},
        {'[', Tok::LBracket}, {']', Tok::RBracket}, {',', Tok::Comma},  {'=', Tok::Equal},
        {':', Tok::Colon},    {'*', Tok::Star},     {'+', Tok::Plus},   {'-', Tok::Minus}};
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
  int64_t line_ = 1, col_ = 1;
};

// ---- Parser ------------------------------------------------------------------

class Parser {
public:
  Parser(std::string_view text, std::string_view file) : lexer_(text), file_(file) { advance(); }

  Expected<std::vector<Kernel>> kernels() {
    std::vector<Kernel> out;
    while (!at(Tok::End)) {
      KILN_ASSIGN_OR_RETURN(Kernel k, kernel());
      out.push_back(std::move(k));
    }
    return out;
  }

  Expected<Kernel> single() {
    KILN_ASSIGN_OR_RETURN(Kernel k, kernel());
    if (!at(Tok::End)) return error("expected end of input after the kernel, found " + found());
    return k;
  }

private:
  enum class Kind : uint8_t { Buffer, Param, Var };
  struct Ref {
    Kind kind;
    int index;
  };

  // ---- Tokens ----

  void advance() { tok_ = lexer_.next(); }
  bool at(Tok k) const { return tok_.kind == k; }
  bool atIdent(std::string_view s) const { return tok_.kind == Tok::Ident && tok_.text == s; }

  std::string found() const {
    switch (tok_.kind) {
    case Tok::End:
      return "end of input";
    case Tok::Name:
      return "'%" + tok_.text + "'";
    case Tok::KernelName:
      return "'@" + tok_.text + "'";
    default:
      return "'" + tok_.text + "'";
    }
  }

  Error errorAt(int64_t line, int64_t col, const std::string &message) const {
    return makeError(file_, ":", line, ":", col, ": ", message);
  }
  Error errorAt(const Token &t, const std::string &message) const {
    return errorAt(t.line, t.col, t.kind == Tok::Error ? t.text : message);
  }
  Error error(const std::string &message) const { return errorAt(tok_, message); }

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

  Expected<DType> dtype() {
    if (!at(Tok::Ident)) return error("expected an element type, found " + found());
    std::optional<DType> d = dtypeFromName(tok_.text);
    if (!d) return error("unknown element type '" + tok_.text + "'");
    advance();
    return *d;
  }

  Expected<int64_t> integer() {
    int64_t v = 0;
    if (!at(Tok::Number)) return error("expected an integer, found " + found());
    if (!parseNumber(tok_.text, v)) return error("'" + tok_.text + "' is not an int64 integer");
    advance();
    return v;
  }

  Expected<int> value() {
    if (!at(Tok::Value)) return error("expected an SSA value (%N), found " + found());
    int v = tok_.number;
    advance();
    return v;
  }

  // ---- Names ----

  Status declare(Kind kind, int index, Kernel &k) {
    if (!at(Tok::Name)) return error("expected a name (%name), found " + found());
    if (names_.count(tok_.text)) return error("name %" + tok_.text + " is already declared");
    names_[tok_.text] = Ref{kind, index};
    std::string name = tok_.text;
    advance();
    if (kind == Kind::Param)
      k.params.push_back(std::move(name));
    else if (kind == Kind::Buffer)
      k.buffers.push_back(kir::BufferArg{std::move(name)});
    else
      k.vars.push_back(kir::VarDecl{std::move(name)});
    return Status::success();
  }

  Expected<int> use(Kind kind) {
    static const char *const kWhat[] = {"a buffer", "a param", "a var"};
    const char *what = kWhat[static_cast<int>(kind)];
    if (!at(Tok::Name)) return error(strCat("expected ", what, " (%name), found ", found()));
    auto it = names_.find(tok_.text);
    if (it == names_.end()) return error("use of undefined name %" + tok_.text);
    if (it->second.kind != kind)
      return error(strCat("%", tok_.text, " is ", kWhat[static_cast<int>(it->second.kind)],
                          ", expected ", what));
    advance();
    return it->second.index;
  }

  // ---- Kernel ----

  Expected<Kernel> kernel() {
    names_.clear();
    Kernel k;
    KILN_RETURN_IF_ERROR(expectIdent("kernel"));
    if (!at(Tok::KernelName)) return error("expected a kernel name (@name), found " + found());
    k.name = tok_.text;
    advance();
    KILN_RETURN_IF_ERROR(signature(k));
    maxValue_ = maxLoopVar_ = -1;
    KILN_RETURN_IF_ERROR(block(k, k.body, 0));
    k.numValues = maxValue_ + 1;
    k.numLoopVars = maxLoopVar_ + 1;
    return k;
  }

  // '(' buffers ')' [ 'params' '(' ... ')' ] [ 'vars' '(' ... ')' ]
  Status signature(Kernel &k) {
    KILN_RETURN_IF_ERROR(expect(Tok::LParen, "'('"));
    KILN_RETURN_IF_ERROR(commaList(Tok::RParen, ")", [&]() -> Status {
      KILN_RETURN_IF_ERROR(declare(Kind::Buffer, static_cast<int>(k.buffers.size()), k));
      KILN_RETURN_IF_ERROR(expect(Tok::Colon, "':' and the buffer's element type"));
      KILN_ASSIGN_OR_RETURN(k.buffers.back().dtype, dtype());
      if (atIdent("out")) {
        k.buffers.back().output = true;
        advance();
      }
      return Status::success();
    }));
    if (atIdent("params")) {
      advance();
      KILN_RETURN_IF_ERROR(expect(Tok::LParen, "'('"));
      KILN_RETURN_IF_ERROR(commaList(Tok::RParen, ")", [&]() -> Status {
        return declare(Kind::Param, static_cast<int>(k.params.size()), k);
      }));
    }
    if (atIdent("vars")) {
      advance();
      KILN_RETURN_IF_ERROR(expect(Tok::LParen, "'('"));
      KILN_RETURN_IF_ERROR(commaList(Tok::RParen, ")", [&]() -> Status {
        KILN_RETURN_IF_ERROR(declare(Kind::Var, static_cast<int>(k.vars.size()), k));
        KILN_RETURN_IF_ERROR(expect(Tok::Colon, "':' and the var's element type"));
        KILN_ASSIGN_OR_RETURN(k.vars.back().dtype, dtype());
        return Status::success();
      }));
    }
    return Status::success();
  }

  Status block(const Kernel &k, std::vector<Inst> &out, int depth) {
    KILN_RETURN_IF_ERROR(expect(Tok::LBrace, "'{'"));
    while (!at(Tok::RBrace)) {
      if (at(Tok::End) || at(Tok::Error))
        return error("expected an instruction or '}', found " + found());
      KILN_ASSIGN_OR_RETURN(Inst i, statement(k, depth));
      out.push_back(std::move(i));
    }
    advance();
    return Status::success();
  }

  Expected<Inst> statement(const Kernel &k, int depth) {
    Inst i;
    if (at(Tok::Value)) {
      i.result = tok_.number;
      maxValue_ = std::max(maxValue_, i.result);
      advance();
      KILN_RETURN_IF_ERROR(expect(Tok::Equal, "'='"));
      KILN_RETURN_IF_ERROR(expression(k, i));
      return i;
    }
    if (atIdent("store")) {
      advance();
      i.op = Opcode::Store;
      KILN_ASSIGN_OR_RETURN(i.buffer, use(Kind::Buffer));
      i.type = k.buffers[i.buffer].dtype;
      KILN_RETURN_IF_ERROR(bracketedIndex(i));
      KILN_RETURN_IF_ERROR(expect(Tok::Comma, "','"));
      KILN_ASSIGN_OR_RETURN(int v, value());
      i.operands = {v};
      return i;
    }
    if (atIdent("write")) {
      advance();
      i.op = Opcode::VarWrite;
      KILN_ASSIGN_OR_RETURN(i.var, use(Kind::Var));
      i.type = k.vars[i.var].dtype;
      KILN_RETURN_IF_ERROR(expect(Tok::Comma, "','"));
      KILN_ASSIGN_OR_RETURN(int v, value());
      i.operands = {v};
      return i;
    }
    if (atIdent("for") || atIdent("parallel") || atIdent("vector") || atIdent("unroll"))
      return loop(k, depth);
    if (atIdent("if")) {
      if (depth >= kMaxKernelLoopDepth)
        return error(strCat("blocks are nested more than ", kMaxKernelLoopDepth, " deep"));
      advance();
      i.op = Opcode::If;
      KILN_ASSIGN_OR_RETURN(int cond, value());
      i.operands = {cond};
      KILN_RETURN_IF_ERROR(block(k, i.body, depth + 1));
      return i;
    }
    return error("expected an instruction (%N = ..., store, write, if or a loop), found " +
                 found());
  }

  Expected<Inst> loop(const Kernel &k, int depth) {
    if (depth >= kMaxKernelLoopDepth)
      return error(strCat("loops are nested more than ", kMaxKernelLoopDepth, " deep"));
    Inst i;
    i.op = Opcode::Loop;
    const std::string keyword = tok_.text;
    advance();
    using K = Schedule::Kind;
    i.schedule.kind = keyword == "for"        ? K::Serial
                      : keyword == "parallel" ? K::Parallel
                      : keyword == "vector"   ? K::Vector
                                              : K::Unroll;
    if (i.schedule.kind == K::Vector || i.schedule.kind == K::Unroll) {
      KILN_RETURN_IF_ERROR(expect(Tok::LParen, "'('"));
      if (!at(Tok::Number) || !parseNumber(tok_.text, i.schedule.width))
        return error(strCat("expected the ", keyword == "vector" ? "vector width" : "unroll factor",
                            ", found ", found()));
      advance();
      KILN_RETURN_IF_ERROR(expect(Tok::RParen, "')'"));
    }
    if (!at(Tok::LoopVar)) return error("expected a loop variable (%iN), found " + found());
    i.loopVar = tok_.number;
    maxLoopVar_ = std::max(maxLoopVar_, i.loopVar);
    advance();
    KILN_RETURN_IF_ERROR(expect(Tok::Equal, "'='"));
    if (!at(Tok::Number) || tok_.text != "0")
      return error("expected 0 (loops start at 0), found " + found());
    advance();
    KILN_RETURN_IF_ERROR(expectIdent("to"));
    KILN_ASSIGN_OR_RETURN(i.upper, affine());
    KILN_RETURN_IF_ERROR(block(k, i.body, depth + 1));
    return i;
  }

  // `: type`, the last part of most instructions.
  Expected<DType> typeSuffix() {
    KILN_RETURN_IF_ERROR(expect(Tok::Colon, "':' and a type"));
    return dtype();
  }

  Status expression(const Kernel &k, Inst &i) {
    if (!at(Tok::Ident)) return error("expected an opcode, found " + found());
    Token opTok = tok_;
    if (!kir::opcodeFromName(tok_.text, i.op)) return error("unknown opcode '" + tok_.text + "'");
    advance();
    switch (i.op) {
    case Opcode::Store:
    case Opcode::VarWrite:
    case Opcode::Loop:
    case Opcode::If:
      return errorAt(opTok, "'" + opTok.text + "' has no result");
    case Opcode::Index: {
      i.type = DType::I64;
      KILN_ASSIGN_OR_RETURN(i.index, affine());
      return Status::success();
    }
    case Opcode::Const:
      return constant(i);
    case Opcode::Load: {
      KILN_ASSIGN_OR_RETURN(i.buffer, use(Kind::Buffer));
      i.type = k.buffers[i.buffer].dtype;
      return bracketedIndex(i);
    }
    case Opcode::VarRead: {
      KILN_ASSIGN_OR_RETURN(i.var, use(Kind::Var));
      i.type = k.vars[i.var].dtype;
      return Status::success();
    }
    case Opcode::Cast: {
      KILN_ASSIGN_OR_RETURN(int v, value());
      i.operands = {v};
      KILN_ASSIGN_OR_RETURN(i.castFrom, typeSuffix());
      KILN_RETURN_IF_ERROR(expectIdent("to"));
      KILN_ASSIGN_OR_RETURN(i.type, dtype());
      return Status::success();
    }
    default:
      break;
    }
    size_t n = kir::isUnary(i.op) ? 1 : i.op == Opcode::Select ? 3 : 2;
    for (size_t o = 0; o < n; ++o) {
      if (o) KILN_RETURN_IF_ERROR(expect(Tok::Comma, strCat("',' (", n, " operands)")));
      KILN_ASSIGN_OR_RETURN(int v, value());
      i.operands.push_back(v);
    }
    KILN_ASSIGN_OR_RETURN(DType t, typeSuffix());
    if (kir::isCompare(i.op)) {
      i.castFrom = t;
      i.type = DType::Bool;
    } else {
      i.type = t;
    }
    return Status::success();
  }

  // The literal is read before its type and converted after, so each type
  // converts (and rounds) the text exactly once.
  Status constant(Inst &i) {
    Token lit = tok_;
    bool negative = at(Tok::Minus);
    if (negative) advance();
    bool word = atIdent("inf") || atIdent("nan") || atIdent("true") || atIdent("false");
    if (negative && !atIdent("inf")) return error("expected inf after '-', found " + found());
    if (!at(Tok::Number) && !word)
      return error("expected a constant (a number, inf, nan, true or false), found " + found());
    std::string text = tok_.text;
    advance();
    KILN_ASSIGN_OR_RETURN(i.type, typeSuffix());
    std::string typeName(dtypeName(i.type));
    if (isFloat(i.type)) {
      if (text == "true" || text == "false")
        return errorAt(lit, "'" + text + "' is not a number (the constant is " + typeName + ")");
      if (text == "inf" || text == "nan") {
        i.fimm = text == "nan" ? std::numeric_limits<double>::quiet_NaN()
                               : std::numeric_limits<double>::infinity();
        if (negative) i.fimm = -i.fimm;
        return Status::success();
      }
      bool ok;
      if (i.type == DType::F64) {
        ok = parseNumber(text, i.fimm);
      } else {
        // The value of the type, as the printer writes it (kernel/printer.h).
        float f = 0;
        ok = parseNumber(text, f);
        if (i.type == DType::F16) f = static_cast<float>(Half(f));
        if (i.type == DType::BF16) f = static_cast<float>(BFloat16(f));
        i.fimm = f;
      }
      double wide = 0;
      if (!ok && parseNumber(text, wide))
        return errorAt(lit, "'" + text + "' is out of range for " + typeName);
      if (!ok) return errorAt(lit, "'" + text + "' is not a number");
      return Status::success();
    }
    if (text == "true" || text == "false") {
      if (i.type != DType::Bool)
        return errorAt(lit, "'" + text + "' is a bool (the constant is " + typeName + ")");
      i.iimm = text == "true";
      return Status::success();
    }
    bool ok;
    if (i.type == DType::U64) {
      uint64_t u = 0;
      ok = parseNumber(text, u);
      i.iimm = static_cast<int64_t>(u);
    } else {
      ok = parseNumber(text, i.iimm);
    }
    if (!ok)
      return errorAt(lit, "'" + text + "' is not an integer (the constant is " + typeName + ")");
    return Status::success();
  }

  // '[' affine [ '+' VALUE ] ']', or '[' VALUE ']': a load's or store's
  // index with its optional dynamic part.
  Status bracketedIndex(Inst &i) {
    KILN_RETURN_IF_ERROR(expect(Tok::LBracket, "'['"));
    KILN_ASSIGN_OR_RETURN(i.index, affine(&i.dynIndex));
    return expect(Tok::RBracket, "']'");
  }

  // `dynIndex`, when given, may receive one SSA value as the last term.
  Expected<Affine> affine(int *dynIndex = nullptr) {
    Affine a;
    for (;;) {
      kir::Term term;
      bool hasCoeff = false;
      if (dynIndex && at(Tok::Value)) {
        KILN_ASSIGN_OR_RETURN(*dynIndex, value());
        if (at(Tok::Plus) || at(Tok::Star))
          return error("the value term of an index comes last and alone");
        return a;
      }
      for (;;) {
        if (at(Tok::Number)) {
          if (hasCoeff) return error("a term has at most one coefficient");
          KILN_ASSIGN_OR_RETURN(term.coeff, integer());
          hasCoeff = true;
        } else if (at(Tok::LoopVar)) {
          if (term.loopVar >= 0) return error("a term has at most one loop variable");
          term.loopVar = tok_.number;
          advance();
        } else if (at(Tok::Name)) {
          if (term.param >= 0) return error("a term has at most one param");
          KILN_ASSIGN_OR_RETURN(term.param, use(Kind::Param));
        } else {
          return error("expected an integer, loop variable or param, found " + found());
        }
        if (!at(Tok::Star)) break;
        advance();
      }
      a.terms.push_back(term);
      if (at(Tok::Minus) || (at(Tok::Number) && tok_.text[0] == '-'))
        return error("terms are joined by '+'; subtract with a negative coefficient (+ -1 * %n)");
      if (!at(Tok::Plus)) break;
      advance();
    }
    // The printer writes no terms as `0`.
    if (a.terms.size() == 1 && a.terms[0].coeff == 0 && a.terms[0].param < 0 &&
        a.terms[0].loopVar < 0)
      a.terms.clear();
    return a;
  }

  Lexer lexer_;
  std::string file_;
  Token tok_;
  std::unordered_map<std::string, Ref> names_;
  int maxValue_ = -1, maxLoopVar_ = -1;
};

} // namespace

Expected<kir::Kernel> parseKernel(std::string_view text, std::string_view fileNameForErrors) {
  return Parser(text, fileNameForErrors).single();
}

Expected<std::vector<kir::Kernel>> parseKernels(std::string_view text,
                                                std::string_view fileNameForErrors) {
  return Parser(text, fileNameForErrors).kernels();
}

} // namespace kiln
