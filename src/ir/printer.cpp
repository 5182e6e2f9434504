#include "ir/printer.h"

#include <cmath>
#include <cstdio>
#include <sstream>
#include <vector>

#include "ir/ir.h"

namespace llga {

std::string formatDouble(double v) {
  if (std::isnan(v)) return std::signbit(v) ? "-nan" : "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s(buf);
  if (s.find_first_of(".e") == std::string::npos) s += ".";
  return s;
}

std::string quoteString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\'': out += "\\'"; break;
      case '"': out += "\\\""; break;
      case '\a': out += "\\a"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\v': out += "\\v"; break;
      default:
        if (c >= 0x20 && c < 0x7f) {
          out += static_cast<char>(c);
        } else {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\%03o", c);
          out += buf;
        }
    }
  }
  return out + "\"";
}

static void printTensorAttr(std::ostream& os, const ConstantTensor& t) {
  if (!t.literal.empty()) { os << t.literal; return; }
  if (t.hasData() && t.numel() == 1) {
    double v = t.scalarAsDouble(0);
    bool fp = t.dtype == ScalarType::Float || t.dtype == ScalarType::Double || t.dtype == ScalarType::Half ||
              t.dtype == ScalarType::BFloat16;
    os << "{";
    if (fp) os << v; else os << static_cast<int64_t>(v);
    os << "}";
    return;
  }
  os << "<Tensor>";
}

static void printAttr(std::ostream& os, const AttrValue& a, bool in_list, const TensorNamer* namer = nullptr) {
  if (!a.annotation.empty()) {
    AttrValue inner = a;
    inner.annotation.clear();
    // PyTorch writes annotate(List[int], []) but annotate(Dict[str, Tensor],{})
    os << "annotate(" << a.annotation << (a.seq == AttrValue::Seq::Dict ? "," : ", ");
    printAttr(os, inner, in_list, namer);
    os << ")";
    return;
  }
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, int64_t>) os << x;
        else if constexpr (std::is_same_v<T, double>) os << formatDouble(x);
        else if constexpr (std::is_same_v<T, bool>) os << (x ? "True" : "False");
        else if constexpr (std::is_same_v<T, std::string>) os << quoteString(x);
        else if constexpr (std::is_same_v<T, TensorRef>) {
          if (namer) os << "<Tensor:" << (*namer)(x) << ">";
          else if (in_list) os << (x->literal == "<Tensors>" ? "<Tensors>" : "<Tensor>");
          else printTensorAttr(os, *x);
        } else if constexpr (std::is_same_v<T, TypePtr>) os << x->str();
        else if constexpr (std::is_same_v<T, std::shared_ptr<Graph>>) os << "<Graph>";
        else if constexpr (std::is_same_v<T, std::monostate>) os << "None";
        else {
          const bool dict = a.seq == AttrValue::Seq::Dict, tuple = a.seq == AttrValue::Seq::Tuple;
          os << (dict ? "{" : tuple ? "(" : "[");
          for (size_t i = 0; i < x.size(); ++i) {
            if (i) os << (dict && i % 2 ? ": " : ", ");
            printAttr(os, x[i], true, namer);
          }
          if (tuple && x.size() == 1) os << ",";
          os << (dict ? "}" : tuple ? ")" : "]");
        }
      },
      a.v);
}

std::string formatAttr(const AttrValue& a) {
  std::ostringstream os;
  printAttr(os, a, false);
  return os.str();
}

namespace {

class Printer {
 public:
  explicit Printer(std::ostream& os, const TensorNamer* namer = nullptr) : os_(os), namer_(namer) {}

  void graph(const Graph& g) {
    os_ << "graph(";
    const auto& ins = g.inputs();
    for (size_t i = 0; i < ins.size(); ++i) {
      if (i) os_ << ",\n      ";
      valueWithType(ins[i]);
    }
    os_ << "):\n";
    block(g.block(), 1);
    indent(1) << "return";
    attributes(g.returnNode(), false);
    os_ << " (";
    valueRefs(g.outputs());
    os_ << ")\n";
    for (size_t i = 0; i < groups_.size(); ++i) {
      os_ << "with " << groups_[i]->kind().toQualString() << "_" << i << " = ";
      Printer(os_, namer_).graph(*groups_[i]->subgraph());
    }
  }

  void node(const Node* n, int level, bool with_blocks) {
    indent(level);
    const auto& outs = n->outputs();
    for (size_t i = 0; i < outs.size(); ++i) {
      if (i) os_ << ", ";
      valueWithType(outs[i]);
    }
    os_ << " = " << n->kind().toQualString();
    if (n->subgraph() && group_numbering_) {
      os_ << "_" << groups_.size();
      groups_.push_back(n);
      attributes(n, /*skip_subgraph=*/true);
    } else {
      attributes(n, false);
    }
    os_ << "(";
    valueRefs(n->inputs());
    os_ << ")";
    if (!n->scope().empty()) os_ << ", scope: " << n->scope();
    if (!n->source().empty()) os_ << " # " << n->source();
    os_ << "\n";
    if (!with_blocks) return;
    for (size_t i = 0; i < n->blocks().size(); ++i) {
      const Block* b = n->blocks()[i];
      indent(level + 1) << "block" << i << "(";
      const auto& ins = b->inputs();
      for (size_t j = 0; j < ins.size(); ++j) {
        if (j) os_ << ", ";
        valueWithType(ins[j]);
      }
      os_ << "):\n";
      block(b, level + 2);
      indent(level + 2) << "-> (";
      valueRefs(b->outputs());
      os_ << ")\n";
    }
  }

  bool group_numbering_ = true;

 private:
  std::ostream& indent(int level) {
    for (int i = 0; i < level; ++i) os_ << "  ";
    return os_;
  }
  void block(const Block* b, int level) {
    for (const Node* n : b->nodes()) node(n, level, true);
  }
  void valueWithType(const Value* v) { os_ << "%" << v->debugName() << " : " << v->type()->str(); }
  void valueRefs(const std::vector<Value*>& vs) {
    for (size_t i = 0; i < vs.size(); ++i) os_ << (i ? ", %" : "%") << vs[i]->debugName();
  }
  void attributes(const Node* n, bool skip_subgraph) {
    bool first = true;
    for (const auto& [name, value] : n->attributes()) {
      if (skip_subgraph && name == attr::Subgraph) continue;
      os_ << (first ? "[" : ", ") << name.name() << "=";
      printAttr(os_, value, false, namer_);
      first = false;
    }
    if (!first) os_ << "]";
  }

  std::ostream& os_;
  const TensorNamer* namer_;
  std::vector<const Node*> groups_;
};

}  // namespace

void Graph::print(std::ostream& os) const { Printer(os).graph(*this); }

void printWithTensorIndices(std::ostream& os, const Graph& g, const TensorNamer& namer) { Printer(os, &namer).graph(g); }

std::string Graph::toString() const {
  std::ostringstream os;
  print(os);
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Graph& g) {
  g.print(os);
  return os;
}

std::string Node::str() const {
  std::ostringstream os;
  Printer p(os);
  p.group_numbering_ = false;
  p.node(this, 0, false);
  std::string s = os.str();
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

}  // namespace llga
