#include "frontend/parser.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <unordered_map>

#include "frontend/tensor_literal.h"
#include "ir/verifier.h"

namespace llga {
namespace {

constexpr int kMaxDepth = 128;  // nesting of types, lists and blocks

bool allDigits(std::string_view s);

// Group nodes print as <kind>_<N> (prim::oneDNNFusionGroup_0, llga::FusionGroup_1,
// prim::DifferentiableGraph_0) with their subgraph in a later with-clause.
bool isGroupKind(std::string_view text) {
  size_t us = text.rfind('_');
  if (us == std::string_view::npos || !allDigits(text.substr(us + 1))) return false;
  std::string_view base = text.substr(0, us);
  for (std::string_view suffix : {"Group", "Graph"})
    if (base.size() > suffix.size() && base.substr(base.size() - suffix.size()) == suffix) return true;
  return false;
}

bool allDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

class Parser {
 public:
  Parser(std::string_view text, const ParseOptions& opts) : lex_(text, opts.filename), tensors_(opts.tensors) {}

  // file := graph <end>
  std::shared_ptr<Graph> parseFile() {
    auto g = parseGraph();
    if (lex_.peek().kind != Tok::End) {
      if (lex_.peekIdent("with")) lex_.error(lex_.peek().pos, "no node in this graph is named by this 'with' clause");
      lex_.error(lex_.peek().pos, "unexpected text after the graph's return");
    }
    return g;
  }

  // type := base ('[' ']' | '?')*
  TypePtr parseType() {
    DepthGuard guard(this, lex_.peek().pos);
    TypePtr t = parseBaseType();
    while (true) {
      if (lex_.peek().kind == Tok::LBracket) {
        size_t save = lex_.pos();
        lex_.next();
        if (!lex_.accept(Tok::RBracket)) { lex_.seek(save); break; }
        t = Type::list(t);
      } else if (lex_.accept(Tok::Question)) {
        t = Type::optional(t);
      } else {
        break;
      }
    }
    return t;
  }

  Lexer& lexer() { return lex_; }

 private:
  struct DepthGuard {
    DepthGuard(Parser* p, size_t pos) : p(p) {
      if (++p->depth_ > kMaxDepth) p->lex_.error(pos, "nesting too deep");
    }
    ~DepthGuard() { --p->depth_; }
    Parser* p;
  };

  // Per-graph state: a subgraph has its own names.
  struct GraphState {
    std::shared_ptr<Graph> graph;
    std::unordered_map<std::string_view, Value*> visible;  // names in scope here
    std::vector<std::vector<std::string_view>> frames;     // names each open block added
    std::unordered_map<std::string_view, size_t> defined;  // every name -> position of its definition
    std::unordered_map<std::string_view, Node*> groups;    // "prim::FooGroup_0" -> node awaiting a subgraph
    std::unordered_map<std::string_view, size_t> group_pos;
  };

  // graph := 'graph' '(' [param (',' param)*] ')' ':' body 'return' [attrs] '(' refs ')' with*
  std::shared_ptr<Graph> parseGraph() {
    GraphState st;
    st.graph = std::make_shared<Graph>();
    st.frames.emplace_back();
    if (!lex_.peekIdent("graph")) lex_.expect(Tok::Ident, "'graph'");
    lex_.next();
    lex_.expect(Tok::LParen, "'(' after 'graph'");
    if (!lex_.accept(Tok::RParen)) {
      do {
        auto [tok, type] = parseValueDef(st);
        bringIntoScope(st, tok, st.graph->addInput(std::string(tok.text), type));
      } while (lex_.accept(Tok::Comma));
      lex_.expect(Tok::RParen, "')' or ',' in the graph's inputs");
    }
    lex_.expect(Tok::Colon, "':' after the graph's inputs");
    parseBody(st, st.graph->block());
    if (!lex_.peekIdent("return")) lex_.expect(Tok::Ident, "'return' or a node");
    lex_.next();
    // return[batch_dim=0] (...): what a pass proved about the whole graph
    if (lex_.peek().kind == Tok::LBracket) parseAttributes(st.graph->returnNode());
    for (Value* v : parseValueRefList(st, "'(' after 'return'")) st.graph->registerOutput(v);
    // with-clauses: subgraphs of this graph's group nodes, in printed order.
    while (lex_.peekIdent("with")) {
      size_t save = lex_.pos();
      lex_.next();
      Token kind = lex_.expect(Tok::Ident, "a group kind after 'with'");
      auto it = st.groups.find(kind.text);
      if (it == st.groups.end()) { lex_.seek(save); break; }  // belongs to an enclosing graph
      lex_.expect(Tok::Equals, "'=' after the group kind");
      DepthGuard guard(this, kind.pos);
      Node* group = it->second;
      st.groups.erase(it);
      std::string_view text = kind.text;
      group->setKind(Symbol::fromQualString(text.substr(0, text.rfind('_'))));
      group->setAttr(attr::Subgraph, parseGraph());
    }
    // Every group node needs its printed subgraph.
    for (const auto& [text, node] : st.groups)
      lex_.error(st.group_pos.at(text),
                 std::string(text) + " has no 'with " + std::string(text) + " = graph(...)' subgraph after the graph");
    return st.graph;
  }

  // body := (node | comment)*   ending before 'return' or '->'
  void parseBody(GraphState& st, Block* block) {
    while (true) {
      const Token& t = lex_.peek();
      if (t.kind == Tok::ValueRef || t.kind == Tok::Equals) {
        parseNode(st, block);
      } else {
        return;
      }
    }
  }

  // node := [valuedef (',' valuedef)*] '=' KIND attrs? '(' refs ')' trailer block*
  void parseNode(GraphState& st, Block* block) {
    std::vector<std::pair<Token, TypePtr>> outs;
    if (lex_.peek().kind != Tok::Equals) {
      do outs.push_back(parseValueDef(st));
      while (lex_.accept(Tok::Comma));
    }
    lex_.expect(Tok::Equals, "'=' after the node's outputs");
    Token kind = lex_.expect(Tok::Ident, "an operator kind");
    if (kind.text.find("::") == std::string_view::npos)
      lex_.error(kind.pos, "expected an operator kind like aten::relu, got '" + std::string(kind.text) + "'");
    Node* n = st.graph->create(Symbol::fromQualString(kind.text), 0);
    for (auto& [tok, type] : outs) n->addOutput(type, std::string(tok.text));
    if (lex_.peek().kind == Tok::LBracket) parseAttributes(n);
    for (Value* v : parseValueRefList(st, "'(' before the node's inputs")) n->addInput(v);
    block->appendNode(n);
    parseTrailer(n);
    if (isGroupKind(kind.text)) {
      if (!st.groups.emplace(kind.text, n).second) lex_.error(kind.pos, "group kind " + std::string(kind.text) + " used twice");
      st.group_pos[kind.text] = kind.pos;
    }
    for (size_t i = 0; lex_.peek().kind == Tok::Ident && lex_.peek().text.substr(0, 5) == "block"; ++i) {
      if (!canHaveBlocks(*n)) lex_.error(lex_.peek().pos, n->kind().toQualString() + " cannot have blocks");
      parseBlock(st, n, i);
    }
    if (std::string problem = checkNodeShape(*n); !problem.empty()) lex_.error(kind.pos, problem);
    // Outputs come into scope after the inputs and the node's own blocks.
    for (size_t i = 0; i < outs.size(); ++i) bringIntoScope(st, outs[i].first, n->outputs()[i]);
  }

  // block := 'block' N '(' [valuedef (',' valuedef)*] ')' ':' body '->' '(' refs ')'
  void parseBlock(GraphState& st, Node* owner, size_t index) {
    Token head = lex_.next();
    if (head.text != "block" + std::to_string(index))
      lex_.error(head.pos, "expected block" + std::to_string(index) + ", got '" + std::string(head.text) + "'");
    DepthGuard guard(this, head.pos);
    Block* b = owner->addBlock();
    st.frames.emplace_back();
    lex_.expect(Tok::LParen, "'(' after the block name");
    if (!lex_.accept(Tok::RParen)) {
      do {
        auto [tok, type] = parseValueDef(st);
        bringIntoScope(st, tok, b->addInput(std::string(tok.text), type));
      } while (lex_.accept(Tok::Comma));
      lex_.expect(Tok::RParen, "')' or ',' in the block's inputs");
    }
    lex_.expect(Tok::Colon, "':' after the block's inputs");
    parseBody(st, b);
    lex_.expect(Tok::Arrow, "'->' ending the block, or a node");
    for (Value* v : parseValueRefList(st, "'(' after '->'")) b->registerOutput(v);
    for (std::string_view name : st.frames.back()) st.visible.erase(name);
    st.frames.pop_back();
  }

  // valuedef := VALUE ':' type
  // Declares the name (names are unique in a graph, whatever the block).
  std::pair<Token, TypePtr> parseValueDef(GraphState& st) {
    Token v = lex_.expect(Tok::ValueRef, "a value like %x");
    if (!st.defined.emplace(v.text, v.pos).second) lex_.error(v.pos, "redefinition of %" + std::string(v.text));
    lex_.expect(Tok::Colon, "':' and a type after the value name (types are required)");
    return {v, parseTypeCached()};
  }

  // Most values of a graph share a handful of type spellings; types are
  // immutable, so one TypePtr serves every identical spelling.
  TypePtr parseTypeCached() {
    std::string_view text = lex_.text();
    size_t start = lex_.peek().pos, end = start;
    int depth = 0;
    for (; end < text.size(); ++end) {
      char c = text[end];
      if (c == '(' || c == '[') ++depth;
      else if ((c == ')' || c == ']') && --depth < 0) break;
      else if (depth == 0 && (c == ',' || c == '=' || c == '\n')) break;
    }
    while (end > start && (text[end - 1] == ' ' || text[end - 1] == '\r')) --end;
    std::string_view span = text.substr(start, end - start);
    if (auto it = type_cache_.find(span); it != type_cache_.end()) {
      lex_.seek(end);
      return it->second;
    }
    TypePtr t = parseType();
    if (lex_.pos() == end) type_cache_.emplace(span, t);
    return t;
  }

  // Makes a declared value usable by the nodes that follow in this block.
  void bringIntoScope(GraphState& st, const Token& tok, Value* v) {
    st.visible[tok.text] = v;
    st.frames.back().push_back(tok.text);
  }

  // refs := '(' [VALUE (',' VALUE)*] ')'
  std::vector<Value*> parseValueRefList(GraphState& st, const char* open_what) {
    lex_.expect(Tok::LParen, open_what);
    std::vector<Value*> out;
    if (lex_.accept(Tok::RParen)) return out;
    do {
      Token t = lex_.expect(Tok::ValueRef, "a value like %x");
      auto it = st.visible.find(t.text);
      if (it == st.visible.end()) {
        bool declared = st.defined.count(t.text);
        lex_.error(t.pos, declared ? "use of %" + std::string(t.text) +
                                         " outside the block that defines it, or before its definition"
                                   : "use of undefined value %" + std::string(t.text));
      }
      out.push_back(it->second);
    } while (lex_.accept(Tok::Comma));
    lex_.expect(Tok::RParen, "')' or ',' in the value list");
    return out;
  }

  // trailer := [',' 'scope:' SCOPE] ['#' SOURCE] end-of-line
  void parseTrailer(Node* n) {
    std::string_view text = lex_.text();
    size_t p = lex_.skipBlanks();
    if (p < text.size() && text[p] == ',') {
      constexpr std::string_view kw = "scope:";
      size_t q = p + 1;
      while (q < text.size() && (text[q] == ' ' || text[q] == '\t')) ++q;
      if (text.substr(q, kw.size()) != kw) lex_.error(q, "expected 'scope:' after ','");
      q += kw.size();
      while (q < text.size() && (text[q] == ' ' || text[q] == '\t')) ++q;
      size_t s = q;
      while (q < text.size() && text[q] != ' ' && text[q] != '\t' && text[q] != '\n' && text[q] != '\r') ++q;
      if (q == s) lex_.error(s, "expected a scope name after 'scope:'");
      n->setScope(std::string(text.substr(s, q - s)));
      lex_.seek(q);
      p = lex_.skipBlanks();
    }
    if (p < text.size() && text[p] == '#') {
      size_t e = text.find('\n', p);
      if (e == std::string_view::npos) e = text.size();
      std::string_view src = text.substr(p + 1, e - p - 1);
      while (!src.empty() && (src.front() == ' ')) src.remove_prefix(1);
      while (!src.empty() && (src.back() == ' ' || src.back() == '\r')) src.remove_suffix(1);
      n->setSource(std::string(src));
      lex_.seek(e);
      p = e;
    }
    if (p < text.size() && text[p] != '\n') lex_.error(p, "unexpected text after the node");
  }

  // attrs := '[' NAME '=' attrvalue (',' NAME '=' attrvalue)* ']'
  void parseAttributes(Node* n) {
    lex_.expect(Tok::LBracket, "'['");
    do {
      Token name = lex_.expect(Tok::Ident, "an attribute name");
      if (name.text.find("::") != std::string_view::npos || name.text.find('.') != std::string_view::npos)
        lex_.error(name.pos, "bad attribute name '" + std::string(name.text) + "'");
      Symbol key = Symbol::attr(name.text);
      if (n->hasAttribute(key)) lex_.error(name.pos, "attribute '" + std::string(name.text) + "' given twice");
      lex_.expect(Tok::Equals, "'=' after the attribute name");
      n->setAttr(key, parseAttrValue(n));
    } while (lex_.accept(Tok::Comma));
    lex_.expect(Tok::RBracket, "']' or ',' in the attribute list");
  }

  // attrvalue := INT | FLOAT | STRING | 'True' | 'False' | 'None' | list | tuple | dict
  //            | '<' NAME '>' | '{' number '}' | tensor-literal | type
  // list      := '[' [attrvalue (',' attrvalue)*] ']'
  // tuple     := '(' ')' | '(' attrvalue ',' ')' | '(' attrvalue (',' attrvalue)+ ')'
  // dict      := '{' [attrvalue ':' attrvalue (',' attrvalue ':' attrvalue)*] '}'
  AttrValue parseAttrValue(Node* n) {
    DepthGuard guard(this, lex_.pos());
    size_t literal_end = 0;
    if (auto t = tryParseTensorLiteral(lex_.text(), lex_.pos(), &literal_end, [&](size_t pos, const std::string& m) {
          lex_.error(pos, m);
        })) {
      lex_.seek(literal_end);
      return AttrValue(TensorRef(std::move(t)));
    }
    Token t = lex_.next();
    switch (t.kind) {
      case Tok::Int: return AttrValue(parseInt(t));
      case Tok::Float: return AttrValue(parseDouble(t));
      case Tok::String: return AttrValue(lex_.unquote(t));
      case Tok::LBracket: {
        AttrList items;
        if (lex_.accept(Tok::RBracket)) return AttrValue(std::move(items));
        do items.push_back(parseAttrValue(n));
        while (lex_.accept(Tok::Comma));
        lex_.expect(Tok::RBracket, "']' or ',' in the list");
        return AttrValue(std::move(items));
      }
      case Tok::LParen: {
        AttrValue tuple{AttrList{}};
        tuple.seq = AttrValue::Seq::Tuple;
        AttrList& items = std::get<AttrList>(tuple.v);
        while (!lex_.accept(Tok::RParen)) {
          items.push_back(parseAttrValue(n));
          if (lex_.accept(Tok::RParen)) {
            if (items.size() == 1) lex_.error(t.pos, "a one-element tuple is written (x,)");
            break;
          }
          lex_.expect(Tok::Comma, "',' or ')' in the tuple");
        }
        return tuple;
      }
      case Tok::Less: {
        Token what = lex_.expect(Tok::Ident, "'Tensor' or 'Graph' after '<'");
        if (what.text == "Tensor" && lex_.accept(Tok::Colon)) return AttrValue(tableTensor());  // <Tensor:N>
        lex_.expect(Tok::Greater, "'>'");
        if (what.text == "Tensor" || what.text == "Tensors") {
          auto t = unboundTensor(n);
          if (what.text == "Tensors") t->literal = "<Tensors>";  // a frozen tensor list, printed [<Tensors>]
          return AttrValue(TensorRef(std::move(t)));
        }
        lex_.error(what.pos, "cannot read a <" + std::string(what.text) + "> attribute from text");
      }
      case Tok::LBrace: {
        size_t after_brace = lex_.pos();
        Token num = lex_.next();
        if ((num.kind == Tok::Int || num.kind == Tok::Float) && lex_.accept(Tok::RBrace))
          return AttrValue(TensorRef(scalarTensor(n, num)));  // {2}: a one-element tensor
        lex_.seek(after_brace);
        AttrValue dict{AttrList{}};
        dict.seq = AttrValue::Seq::Dict;
        AttrList& items = std::get<AttrList>(dict.v);
        if (lex_.accept(Tok::RBrace)) return dict;
        do {
          items.push_back(parseAttrValue(n));
          lex_.expect(Tok::Colon, "':' after the dict key");
          items.push_back(parseAttrValue(n));
        } while (lex_.accept(Tok::Comma));
        lex_.expect(Tok::RBrace, "'}' or ',' in the dict");
        return dict;
      }
      case Tok::Ident: {
        if (t.text == "True" || t.text == "False") return AttrValue(t.text == "True");
        if (t.text == "None") return AttrValue(std::monostate{});
        if (t.text == "annotate" && lex_.peek().kind == Tok::LParen) return parseAnnotated(n);
        if (t.text == "inf" || t.text == "nan") return AttrValue(parseDouble(t));
        lex_.seek(t.pos);
        return AttrValue(parseType());
      }
      default: {
        std::string got = t.kind == Tok::End ? "end of input" : "'" + std::string(t.text.substr(0, 40)) + "'";
        lex_.error(t.pos, "expected an attribute value, got " + got);
      }
    }
  }

  // annotated := 'annotate' '(' PYTHON-TYPE ',' attrvalue ')'    e.g. annotate(List[int], [])
  // The Python-syntax type is kept as text.
  AttrValue parseAnnotated(Node* n) {
    lex_.expect(Tok::LParen, "'(' after annotate");
    std::string_view text = lex_.text();
    size_t start = lex_.skipBlanks(), p = start;
    int depth = 0;
    for (; p < text.size() && text[p] != '\n'; ++p) {
      if (text[p] == '[' || text[p] == '(') ++depth;
      else if (text[p] == ']' || text[p] == ')') --depth;
      else if (text[p] == ',' && depth == 0) break;
      if (depth < 0) break;
    }
    if (p >= text.size() || text[p] != ',' || p == start) lex_.error(start, "expected 'annotate(Type, value)'");
    std::string annotation(text.substr(start, p - start));
    lex_.seek(p + 1);
    AttrValue v = parseAttrValue(n);
    lex_.expect(Tok::RParen, "')' closing annotate(...)");
    v.annotation = annotation;
    return v;
  }

  std::optional<ScalarType> outputDtype(Node* n) {
    if (n->outputs().size() != 1 || !n->output()->type()->isTensor()) return std::nullopt;
    return n->output()->type()->tensorInfo().dtype;
  }

  // <Tensor:N>: entry N of the model file's tensor table (ParseOptions::tensors).
  TensorRef tableTensor() {
    Token num = lex_.expect(Tok::Int, "a tensor table index after '<Tensor:'");
    lex_.expect(Tok::Greater, "'>'");
    if (!tensors_) lex_.error(num.pos, "<Tensor:N> refers to a model file's tensor table, and there is none here");
    int64_t i = parseInt(num);
    if (i < 0 || static_cast<uint64_t>(i) >= tensors_->size())
      lex_.error(num.pos, "tensor table index " + std::to_string(i) + " is out of range (the table has " +
                              std::to_string(tensors_->size()) + " entries)");
    return (*tensors_)[static_cast<size_t>(i)];
  }

  std::shared_ptr<ConstantTensor> unboundTensor(Node* n) {
    auto t = std::make_shared<ConstantTensor>();
    if (n->outputs().size() == 1 && n->output()->type()->isTensor()) {
      const TensorInfo& info = n->output()->type()->tensorInfo();
      if (info.dtype) t->dtype = *info.dtype;
      if (auto s = info.concreteSizes()) t->sizes = *s;
      if (info.strides) t->strides = *info.strides;
    }
    return t;
  }

  // {2} or {0.5}: a one-element tensor printed as its value.
  std::shared_ptr<ConstantTensor> scalarTensor(Node* n, const Token& num) {
    ScalarType dt = outputDtype(n).value_or(num.kind == Tok::Int ? ScalarType::Long : ScalarType::Float);
    if (!canStoreElements(dt))
      lex_.error(num.pos, "cannot read a {...} constant of dtype " + std::string(scalarTypeName(dt)));
    auto t = ConstantTensor::owned(dt, {});
    double v = num.kind == Tok::Int ? static_cast<double>(parseInt(num)) : parseDouble(num);
    int64_t iv = 0;  // what an integral dtype stores: an int as is, a float truncated if it fits
    if (num.kind == Tok::Int) {
      iv = parseInt(num);
    } else if (!isFloatingType(dt)) {
      if (!(std::fabs(v) < 9.2e18))  // NaN too
        lex_.error(num.pos, "{" + std::string(num.text) + "} does not fit the constant's dtype " + std::string(scalarTypeName(dt)));
      iv = static_cast<int64_t>(v);
    }
    storeElement(*t, 0, v, iv);
    t->approximate = num.kind == Tok::Float;
    t->literal = "{" + std::string(num.text) + "}";
    return t;
  }

  int64_t parseInt(const Token& t) {
    int64_t v = 0;
    const char* b = t.text.data();
    const char* e = b + t.text.size();
    if (*b == '+') ++b;
    auto r = std::from_chars(b, e, v);
    if (r.ec != std::errc() || r.ptr != e) lex_.error(t.pos, "integer out of range: " + std::string(t.text));
    return v;
  }

  double parseDouble(const Token& t) {
    std::string s(t.text);
    bool neg = !s.empty() && s[0] == '-';
    std::string body = (neg || (!s.empty() && s[0] == '+')) ? s.substr(1) : s;
    if (body == "nan") return neg ? -std::nan("") : std::nan("");
    if (body == "inf") return neg ? -HUGE_VAL : HUGE_VAL;
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (end != s.c_str() + s.size()) lex_.error(t.pos, "bad number: " + s);
    return v;
  }

  // base := '(' [type (',' type)*] ')' | 'Dict' '(' type ',' type ')'
  //       | 'NamedTuple' '(' [name ':' type (',' name ':' type)*] ')'
  //       | ('Union' | 'Future' | 'RRef') '(' types ')'
  //       | TENSOR details? | SIMPLE | QUALIFIED.NAME
  TypePtr parseBaseType() {
    Token t = lex_.peek();
    if (t.kind == Tok::LParen) {
      lex_.next();
      std::vector<TypePtr> elems;
      if (!lex_.accept(Tok::RParen)) {
        do elems.push_back(parseType());
        while (lex_.accept(Tok::Comma));
        lex_.expect(Tok::RParen, "')' or ',' in the tuple type");
      }
      return Type::tuple(std::move(elems));
    }
    if (t.kind != Tok::Ident) {
      std::string got = t.kind == Tok::End ? "end of input" : "'" + std::string(t.text.substr(0, 40)) + "'";
      lex_.error(t.pos, "expected a type, got " + got);
    }
    lex_.next();
    std::string_view name = t.text;
    auto args = [&](size_t n_min, size_t n_max) {
      lex_.expect(Tok::LParen, "'(' after the type name");
      std::vector<TypePtr> elems;
      do elems.push_back(parseType());
      while (lex_.accept(Tok::Comma));
      lex_.expect(Tok::RParen, "')' closing the type");
      if (elems.size() < n_min || elems.size() > n_max)
        lex_.error(t.pos, std::string(name) + " takes " + std::to_string(n_min) + " type argument(s)");
      return elems;
    };
    if (name == "NamedTuple") {  // NamedTuple(name : type, ...)
      lex_.expect(Tok::LParen, "'(' after NamedTuple");
      std::vector<std::string> names;
      std::vector<TypePtr> elems;
      if (!lex_.accept(Tok::RParen)) {
        do {
          Token field = lex_.expect(Tok::Ident, "a field name in NamedTuple");
          names.emplace_back(field.text);
          lex_.expect(Tok::Colon, "':' after the field name");
          elems.push_back(parseType());
        } while (lex_.accept(Tok::Comma));
        lex_.expect(Tok::RParen, "')' or ',' in NamedTuple");
      }
      return Type::namedTuple(std::move(names), std::move(elems));
    }
    if (name == "Dict") { auto a = args(2, 2); return Type::dict(a[0], a[1]); }
    if (name == "Union") return Type::unionOf(args(1, 1000));
    if (name == "Future") return Type::future(args(1, 1)[0]);
    if (name == "RRef") return Type::rref(args(1, 1)[0]);
    if (name == "Optional") return Type::optional(args(1, 1)[0]);
    if (name == "Tensor") {
      if (lex_.peek().kind != Tok::LParen && !peekUndefined()) return Type::tensor();
      TensorInfo info;
      parseTensorDetails(info, RankMode::FromSizes);
      return Type::tensor(std::move(info));
    }
    // "Float(...)" (rank known) or "FloatTensor(...)" (rank unknown)
    bool rank_unknown = name.size() > 6 && name.substr(name.size() - 6) == "Tensor";
    if (auto dt = scalarTypeFromName(rank_unknown ? name.substr(0, name.size() - 6) : name)) {
      TensorInfo info;
      info.dtype = dt;
      if (!rank_unknown && lex_.peek().kind != Tok::LParen)
        lex_.error(lex_.peek().pos, "expected '(' after the tensor type " + std::string(name));
      parseTensorDetails(info, rank_unknown ? RankMode::Unranked : RankMode::Ranked);
      return Type::tensor(std::move(info));
    }
    if (Type::isKnownSimpleName(name)) return Type::simple(name);
    if (name.find('.') != std::string_view::npos && name.back() != '.') return Type::classType(std::string(name));
    lex_.error(t.pos, "unknown type '" + std::string(name) + "'");
  }

  bool peekUndefined() {
    if (lex_.peek().kind != Tok::LBracket) return false;
    size_t save = lex_.pos();
    lex_.next();
    bool yes = lex_.peekIdent("Undefined");
    lex_.seek(save);
    return yes;
  }

  // Whether a tensor type's rank is known: always for Float(...), never for
  // FloatTensor(...); for Tensor(...) when sizes are listed or the parentheses
  // are empty (a rank-0 tensor of unknown dtype).
  enum class RankMode { Ranked, Unranked, FromSizes };

  // details := '(' [item (',' item)*] ')' ['[' 'Undefined' ']']
  // item    := INT | '*' | 'SS' '(' INT ')' | 'strides' '=' '[' INTs ']'
  //          | 'requires_grad' '=' INT | 'device' '=' NAME [':' INT]
  void parseTensorDetails(TensorInfo& info, RankMode mode) {
    if (mode == RankMode::Ranked) info.sizes.emplace();
    bool open = lex_.accept(Tok::LParen);
    if (open && lex_.accept(Tok::RParen)) {
      if (mode == RankMode::FromSizes) info.sizes.emplace();
    } else if (open) {
      bool first = true;
      do {
        Token t = lex_.next();
        if (t.kind == Tok::Int || t.kind == Tok::Star || (t.kind == Tok::Ident && t.text == "SS")) {
          if (mode == RankMode::FromSizes && first) info.sizes.emplace();
          if (!info.sizes || info.strides || info.requires_grad || info.device)
            lex_.error(t.pos, "tensor sizes must come first, and only in a ranked tensor type");
          if (t.kind == Tok::Int) {
            int64_t size = parseInt(t);
            if (size < 0) lex_.error(t.pos, "negative tensor size");
            info.sizes->push_back(size);
          } else {
            if (t.kind == Tok::Ident) {  // symbolic size SS(-N): kept as unknown
              lex_.expect(Tok::LParen, "'(' after SS");
              lex_.expect(Tok::Int, "an integer");
              lex_.expect(Tok::RParen, "')'");
            }
            info.sizes->push_back(std::nullopt);
          }
        } else if (t.kind == Tok::Ident && t.text == "strides") {
          lex_.expect(Tok::Equals, "'=' after strides");
          lex_.expect(Tok::LBracket, "'[' after strides=");
          std::vector<int64_t> st;
          if (!lex_.accept(Tok::RBracket)) {
            do st.push_back(parseInt(lex_.expect(Tok::Int, "an integer stride")));
            while (lex_.accept(Tok::Comma));
            lex_.expect(Tok::RBracket, "']' or ',' in strides");
          }
          if (!info.sizes || st.size() != info.sizes->size())
            lex_.error(t.pos, "strides must have one entry per dimension");
          info.strides = std::move(st);
        } else if (t.kind == Tok::Ident && t.text == "requires_grad") {
          lex_.expect(Tok::Equals, "'=' after requires_grad");
          Token v = lex_.expect(Tok::Int, "0 or 1");
          if (v.text != "0" && v.text != "1") lex_.error(v.pos, "requires_grad must be 0 or 1");
          info.requires_grad = v.text == "1";
        } else if (t.kind == Tok::Ident && t.text == "device") {
          lex_.expect(Tok::Equals, "'=' after device");
          Token d = lex_.expect(Tok::Ident, "a device name like cpu");
          std::string dev(d.text);
          if (lex_.accept(Tok::Colon)) dev += ":" + std::string(lex_.expect(Tok::Int, "a device index").text);
          info.device = dev;
        } else {
          std::string got = t.kind == Tok::End ? "end of input" : "'" + std::string(t.text.substr(0, 40)) + "'";
          lex_.error(t.pos, "expected a size, strides=, requires_grad= or device= in the tensor type, got " + got);
        }
        first = false;
      } while (lex_.accept(Tok::Comma));
      lex_.expect(Tok::RParen, "')' closing the tensor type");
    }
    if (peekUndefined()) {
      lex_.next();
      lex_.next();
      lex_.expect(Tok::RBracket, "']' after Undefined");
      info.undefined = true;
    }
  }

  Lexer lex_;
  const std::vector<TensorRef>* tensors_;
  int depth_ = 0;
  std::unordered_map<std::string_view, TypePtr> type_cache_;
};

}  // namespace

std::shared_ptr<Graph> parseGraph(std::string_view text, const ParseOptions& options) {
  Parser p(text, options);
  auto g = p.parseFile();
  if (options.verify) {
    auto errors = verify(*g);
    if (!errors.empty()) throw std::logic_error("parser built an invalid graph: " + errors.front());
  }
  return g;
}

TypePtr parseType(std::string_view text) {
  ParseOptions opts;
  Parser p(text, opts);
  TypePtr t = p.parseType();
  if (p.lexer().peek().kind != Tok::End) p.lexer().error(p.lexer().peek().pos, "unexpected text after the type");
  return t;
}

}  // namespace llga
