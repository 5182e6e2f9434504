// forward-attributes: object fields written with prim::SetAttr and read back
// with prim::GetAttr become plain values, so that scripted code which keeps
// state on objects (torchvision's ImageList and LevelMapper, a module that
// caches its anchors, lazily sets up its scales or keeps a correlation
// pyramid on `self`) runs without an object model. An object is either
// made in the graph (prim::CreateObject) or reached from the module input
// through a GetAttr chain (known by its path, however many GetAttr nodes
// fetch it); prim::unchecked_cast, a tuple built and unpacked (an inlined
// method's return) and If outputs that are the same object on every path
// keep its identity.
//
// Reads take the value last set in program order. A field set in one or
// both branches of a prim::If is the If's new output after it (a phi);
// fields set inside a loop are left alone. A SetAttr goes once no read of
// its field is left that could see it; reads of objects whose identity is
// lost in a phi stay until constant-propagation folds the If (the default
// pipeline runs this pass again after it). What is left is an unsupported
// prim::SetAttr/GetAttr, named when the graph is compiled. The importer sets
// every module field the graph writes at the start of the graph, so reads
// before the first write see the module's value.
//
// A module's fields do not carry over between calls: each call starts from
// the module's values (torchvision's modules set what they read in the same
// call). A program whose new value of a field is computed from the value
// the call began with (a counter, a running state) is refused when it is
// imported (llga/_torch.py), and an in-place write into a module tensor by
// remove-mutation, so that no call answers what an earlier one did.
//
//   Given:  %o : ImageList = prim::CreateObject()
//            = prim::SetAttr[name="tensors"](%o, %x)
//           %t : Tensor = prim::GetAttr[name="tensors"](%o)
//   Result: uses of %t read %x; the object and its SetAttr are gone (dce)
#include <map>
#include <set>
#include <unordered_map>

#include "passes/pass.h"
#include "passes/pass_utils.h"

namespace llga {
namespace {

const Symbol kCreateObject = Symbol::fromQualString("prim::CreateObject");
const Symbol kSetAttr = Symbol::fromQualString("prim::SetAttr");
const Symbol kUncheckedCast = Symbol::fromQualString("prim::unchecked_cast");
const Symbol kRaise = Symbol::fromQualString("prim::RaiseException");
const Symbol kTupleConstruct = Symbol::fromQualString("prim::TupleConstruct");
const Symbol kTupleUnpack = Symbol::fromQualString("prim::TupleUnpack");

class ForwardAttributes final : public Pass {
 public:
  std::string_view name() const override { return "forward-attributes"; }
  std::string_view description() const override { return "object fields set and read back become values"; }

  bool run(Graph& g) override {
    objects_.clear();
    types_.clear();
    in_loop_.clear();
    ambiguous_.clear();
    unpacks_.clear();
    for (const Value* in : g.inputs())
      if (in->type()->kind() == TypeKind::Class) objects_[in] = "self";
    int made = 0;
    std::vector<Node*> sets;
    identify(g.block(), made, sets);
    // The items of a tuple built and unpacked are read directly: an object
    // passed that way keeps its identity and is not held by the tuple.
    bool changed = false;
    for (Node* n : unpacks_) {
      const Node* tuple = n->input(0)->node();
      for (size_t i = 0; i < n->outputs().size(); ++i) {
        if (auto it = objects_.find(tuple->input(i)); it != objects_.end()) objects_[n->output(i)] = it->second;
        n->output(i)->replaceAllUsesWith(tuple->input(i));
      }
      changed = true;
    }
    if (sets.empty()) return changed;
    for (const Field& f : in_loop_) note("prim::SetAttr of " + f.first + "." + f.second + " inside a loop: left as it is");
    std::map<Field, Value*> current;
    forward(g.block(), current, changed);
    // SetAttrs go once no read is left that could see them. Reads of a
    // known object left now come before every set of their field; reads
    // of an object not known here might see any set of that field name.
    std::set<std::string> read_unknown;
    g.forEachNode([&](Node* n) {
      if (n->kind() == prim::GetAttr && n->output()->type()->kind() != TypeKind::Class && !fieldOf(*n))
        read_unknown.insert(fieldName(*n));
    });
    for (Node* n : sets) {
      auto f = fieldOf(*n);
      // a read left where a set may have happened (set on one path of an If only, no value before)
      if (!f || in_loop_.count(*f) || ambiguous_.count(*f) || read_unknown.count(f->second)) continue;
      n->destroy();
      changed = true;
    }
    return changed;
  }

 private:
  using Field = std::pair<std::string, std::string>;  // (object, field name)

  static std::string fieldName(const Node& n) { return n.attr(attr::name).get<std::string>(); }

  // Object identities, program order (an If's outputs after its blocks),
  // with every SetAttr and each field's declared type.
  void identify(Block* b, int& made, std::vector<Node*>& sets) {
    for (Node* n : b->nodes()) {
      for (Block* sub : n->blocks()) identify(sub, made, sets);
      if (n->kind() == kCreateObject) objects_[n->output()] = "object#" + std::to_string(made++);
      if ((n->kind() == prim::GetAttr && n->output()->type()->kind() == TypeKind::Class) || n->kind() == kUncheckedCast) {
        auto it = objects_.find(n->input(0));
        if (it != objects_.end())
          objects_[n->output()] = n->kind() == kUncheckedCast ? it->second : it->second + "." + fieldName(*n);
      }
      if (n->kind() == prim::If) identifyIfOutputs(*n);
      if (n->kind() == kTupleUnpack && n->input(0)->node()->kind() == kTupleConstruct &&
          n->input(0)->node()->inputs().size() == n->outputs().size())
        unpacks_.push_back(n);  // a method's returned tuple, unpacked by its caller
      if (n->kind() == prim::GetAttr)
        if (auto f = fieldOf(*n)) types_.emplace(*f, n->output()->type());
      if (n->kind() == kSetAttr) {
        sets.push_back(n);
        if (auto f = fieldOf(*n); f && insideLoop(*n)) in_loop_.insert(*f);
      }
    }
  }

  // An If output is a known object when every branch that returns yields that
  // object (a branch that raises returns nothing: Optional refinement).
  void identifyIfOutputs(const Node& n) {
    for (size_t i = 0; i < n.outputs().size(); ++i) {
      std::optional<std::string> same;
      bool ok = true;
      for (const Block* b : n.blocks()) {
        if (raises(*b)) continue;
        auto it = objects_.find(b->outputs()[i]);
        if (it == objects_.end() || (same && *same != it->second)) ok = false;
        else same = it->second;
      }
      if (ok && same) objects_[n.output(i)] = *same;
    }
  }

  static bool raises(const Block& b) {
    for (const Node* n : b.nodes())
      if (n->kind() == kRaise) return true;
    return false;
  }

  static bool insideLoop(const Node& n) {
    for (const Node* p = n.owningBlock()->owningNode(); p; p = p->owningBlock()->owningNode())
      if (p->kind() == prim::Loop) return true;
    return false;
  }

  std::optional<Field> fieldOf(const Node& n) const {
    auto it = objects_.find(n.input(0));
    if (it == objects_.end()) return std::nullopt;
    return Field{it->second, fieldName(n)};
  }

  void forward(Block* b, std::map<Field, Value*>& current, bool& changed) {
    std::vector<Node*> nodes;
    for (Node* n : b->nodes()) nodes.push_back(n);  // some are destroyed as we go
    for (Node* n : nodes) {
      if (n->kind() == prim::If && n->blocks().size() == 2) {
        forwardIf(n, current, changed);
        continue;
      }
      for (Block* sub : n->blocks()) {  // a loop body (or another block): reads only
        std::map<Field, Value*> inner = current;
        forward(sub, inner, changed);
      }
      if (n->kind() != prim::GetAttr && n->kind() != kSetAttr) continue;
      auto f = fieldOf(*n);
      if (!f || in_loop_.count(*f)) continue;
      if (n->kind() == kSetAttr) {
        current[*f] = n->input(1);
        continue;
      }
      auto set = current.find(*f);
      if (set == current.end()) continue;  // the module's own value (freeze binds it) or not known here
      n->output()->replaceAllUsesWith(set->second);
      n->destroy();
      changed = true;
    }
  }

  // Fields set in a branch leave the If as new outputs.
  void forwardIf(Node* n, std::map<Field, Value*>& current, bool& changed) {
    std::map<Field, Value*> then_values = current, else_values = current;
    forward(n->blocks()[0], then_values, changed);
    forward(n->blocks()[1], else_values, changed);
    std::set<Field> fields;
    for (const auto* m : {&then_values, &else_values})
      for (const auto& [f, v] : *m)
        if (!current.count(f) || current.at(f) != v) fields.insert(f);
    for (const Field& f : fields) {
      auto a = then_values.find(f), b = else_values.find(f);
      if (a == then_values.end() || b == else_values.end()) {  // set on one path only, unknown before
        current.erase(f);
        ambiguous_.insert(f);
        continue;
      }
      if (a->second == b->second) {
        current[f] = a->second;
        continue;
      }
      auto t = types_.find(f);
      TypePtr type = t != types_.end() ? t->second : a->second->type();
      n->blocks()[0]->registerOutput(a->second);
      n->blocks()[1]->registerOutput(b->second);
      current[f] = n->addOutput(type);
      changed = true;
    }
  }

  std::unordered_map<const Value*, std::string> objects_;
  std::map<Field, TypePtr> types_;  // a field's declared type (from its reads)
  std::set<Field> in_loop_;
  std::set<Field> ambiguous_;
  std::vector<Node*> unpacks_;
};

}  // namespace

LLGA_REGISTER_PASS(ForwardAttributes);

}  // namespace llga
