#include "ir/ir.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace llga {
namespace {
constexpr int64_t kLowerBound = std::numeric_limits<int64_t>::min();
constexpr int64_t kUpperBound = std::numeric_limits<int64_t>::max();
constexpr int64_t kInterval = int64_t{1} << 40;

[[noreturn]] void fail(const std::string& msg) { throw std::logic_error("IR: " + msg); }
}  // namespace

// ---------------------------------------------------------------- Value

Graph* Value::owningGraph() const { return node_->owningGraph(); }

Value* Value::setType(TypePtr t) {
  if (!t) fail("null type for %" + name_);
  type_ = std::move(t);
  return this;
}

Value* Value::setDebugName(const std::string& name) {
  owningGraph()->renameValue(this, name);
  return this;
}

void Value::replaceAllUsesWith(Value* v) {
  if (v == this) return;
  for (const Use& u : uses_) {
    u.user->inputs_[u.offset] = v;
    v->uses_.push_back(u);
  }
  uses_.clear();
}

// ---------------------------------------------------------------- Node

std::shared_ptr<Graph> Node::subgraph() const {
  const AttrValue* a = attrs_.find(attr::Subgraph);
  if (!a || !a->is<std::shared_ptr<Graph>>()) return nullptr;
  return a->get<std::shared_ptr<Graph>>();
}

std::string Node::scopeLeaf() const {
  std::string_view s = scope_;
  if (auto slash = s.rfind('/'); slash != std::string_view::npos) s = s.substr(slash + 1);
  constexpr std::string_view prefix = "__module.";
  if (s.substr(0, prefix.size()) == prefix) s = s.substr(prefix.size());
  return std::string(s);
}

void Node::dropInputUse(size_t i) {
  auto& uses = inputs_[i]->uses_;
  auto it = std::find(uses.begin(), uses.end(), Use{this, i});
  if (it == uses.end()) fail("use-list of %" + inputs_[i]->debugName() + " lost a use");
  uses.erase(it);
}

Value* Node::addInput(Value* v) {
  if (!v) fail("null input to " + kind_.toQualString());
  inputs_.push_back(v);
  v->uses_.push_back(Use{this, inputs_.size() - 1});
  return v;
}

void Node::insertInput(size_t i, Value* v) {
  if (i > inputs_.size()) fail("insertInput out of range");
  for (size_t j = i; j < inputs_.size(); ++j) dropInputUse(j);
  inputs_.insert(inputs_.begin() + static_cast<ptrdiff_t>(i), v);
  for (size_t j = i; j < inputs_.size(); ++j) inputs_[j]->uses_.push_back(Use{this, j});
}

void Node::replaceInput(size_t i, Value* v) {
  dropInputUse(i);
  inputs_.at(i) = v;
  v->uses_.push_back(Use{this, i});
}

void Node::replaceInputWith(Value* from, Value* to) {
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (inputs_[i] == from) replaceInput(i, to);
}

void Node::removeInput(size_t i) {
  if (i >= inputs_.size()) fail("removeInput out of range");
  for (size_t j = i; j < inputs_.size(); ++j) dropInputUse(j);
  inputs_.erase(inputs_.begin() + static_cast<ptrdiff_t>(i));
  for (size_t j = i; j < inputs_.size(); ++j) inputs_[j]->uses_.push_back(Use{this, j});
}

void Node::removeAllInputs() {
  for (size_t j = 0; j < inputs_.size(); ++j) dropInputUse(j);
  inputs_.clear();
}

Value* Node::addOutput(TypePtr type) {
  Value* v = graph_->newValue(this, outputs_.size(), type ? std::move(type) : Type::tensor());
  outputs_.push_back(v);
  return v;
}

Value* Node::addOutput(TypePtr type, const std::string& name) {
  Value* v = graph_->newValue(this, outputs_.size(), type ? std::move(type) : Type::tensor(), &name);
  outputs_.push_back(v);
  return v;
}

void Node::eraseOutput(size_t i) {
  Value* v = outputs_.at(i);
  if (v->hasUses()) fail("erasing output %" + v->debugName() + " which still has uses");
  outputs_.erase(outputs_.begin() + static_cast<ptrdiff_t>(i));
  graph_->freeValue(v);
  for (size_t j = i; j < outputs_.size(); ++j) outputs_[j]->offset_ = j;
}

Block* Node::addBlock() {
  auto* b = new Block(graph_, this);
  graph_->all_blocks_.insert(b);
  blocks_.push_back(b);
  return b;
}

void Node::assignTopoPosition() {
  int64_t lo = prev_->topo_position_;
  int64_t hi = next_->topo_position_;
  if (next_ == owning_block_->return_) {
    if (lo < kUpperBound - 2 * kInterval) { topo_position_ = lo + kInterval; return; }
  } else if (prev_ == owning_block_->param_) {
    if (hi > kLowerBound + 2 * kInterval) { topo_position_ = hi - kInterval; return; }
  } else {
    __int128 mid = (static_cast<__int128>(lo) + hi) / 2;
    if (mid != lo && mid != hi) { topo_position_ = static_cast<int64_t>(mid); return; }
  }
  owning_block_->reindexTopology();
}

Node* Node::insertBefore(Node* n) {
  if (inBlockList()) fail(kind_.toQualString() + " is already in a block; use moveBefore");
  if (!n->owning_block_ || n == n->owning_block_->param_) fail("cannot insert before a block's param node");
  owning_block_ = n->owning_block_;
  prev_ = n->prev_;
  next_ = n;
  prev_->next_ = this;
  n->prev_ = this;
  assignTopoPosition();
  return this;
}

Node* Node::insertAfter(Node* n) {
  if (!n->owning_block_ || n == n->owning_block_->return_) fail("cannot insert after a block's return node");
  return insertBefore(n->next_);
}

void Node::moveBefore(Node* n) {
  if (n == this) return;
  prev_->next_ = next_;
  next_->prev_ = prev_;
  next_ = prev_ = nullptr;
  insertBefore(n);
}

void Node::moveAfter(Node* n) { moveBefore(n->next_); }

bool Node::isBefore(const Node* n) const {
  if (owning_block_ != n->owning_block_) fail("isBefore between nodes of different blocks");
  return topo_position_ < n->topo_position_;
}

void Node::destroy() {
  for (Value* o : outputs_)
    if (o->hasUses()) fail("destroying " + kind_.toQualString() + " whose output %" + o->debugName() + " is still used");
  removeAllInputs();
  for (Block* b : blocks_) graph_->freeBlock(b);
  blocks_.clear();
  if (inBlockList()) {
    prev_->next_ = next_;
    next_->prev_ = prev_;
  }
  for (Value* o : outputs_) graph_->freeValue(o);
  outputs_.clear();
  graph_->freeNode(this);
}

// ---------------------------------------------------------------- Block

Block::Block(Graph* g, Node* owner) : graph_(g), owning_node_(owner) {
  param_ = new Node(g, prim::Param);
  return_ = new Node(g, prim::Return);
  g->all_nodes_.insert(param_);
  g->all_nodes_.insert(return_);
  param_->owning_block_ = return_->owning_block_ = this;
  param_->next_ = return_;
  return_->prev_ = param_;
  // The sentinels point at each other in the other direction so that
  // inBlockList() holds for both; iteration stops at return_.
  param_->prev_ = return_;
  return_->next_ = param_;
  param_->topo_position_ = kLowerBound;
  return_->topo_position_ = kUpperBound;
}

const std::vector<Value*>& Block::inputs() const { return param_->outputs(); }
const std::vector<Value*>& Block::outputs() const { return return_->inputs(); }

Value* Block::addInput(std::string name, TypePtr type) {
  return name.empty() ? param_->addOutput(std::move(type)) : param_->addOutput(std::move(type), name);
}
void Block::eraseInput(size_t i) { param_->eraseOutput(i); }
size_t Block::registerOutput(Value* v) {
  return_->addInput(v);
  return return_->inputs().size() - 1;
}
void Block::eraseOutput(size_t i) { return_->removeInput(i); }

void Block::reindexTopology() {
  int64_t pos = kLowerBound;
  for (Node* n : nodes()) {
    pos += kInterval;
    n->topo_position_ = pos;
  }
}

// ---------------------------------------------------------------- Graph

Graph::Graph() {
  block_ = new Block(this, nullptr);
  all_blocks_.insert(block_);
  insert_before_ = block_->returnNode();
}

Graph::~Graph() {
  for (Node* n : all_nodes_) delete n;
  for (Value* v : all_values_) delete v;
  for (Block* b : all_blocks_) delete b;
}

Node* Graph::create(Symbol kind, size_t num_outputs) {
  auto* n = new Node(this, kind);
  all_nodes_.insert(n);
  for (size_t i = 0; i < num_outputs; ++i) n->addOutput();
  return n;
}

Node* Graph::create(Symbol kind, const std::vector<Value*>& inputs, size_t num_outputs) {
  Node* n = create(kind, num_outputs);
  for (Value* v : inputs) n->addInput(v);
  return n;
}

Value* Graph::insertConstant(AttrValue value, TypePtr type) {
  Node* n = create(prim::Constant, 1);
  bool none = type && type->isSimple("NoneType");
  if (!none) n->setAttr(attr::value, std::move(value));
  n->output()->setType(type ? std::move(type) : Type::tensor());
  insertNode(n);
  return n->output();
}

Value* Graph::newValue(Node* n, size_t offset, TypePtr type, const std::string* name) {
  if (name && !isValidName(*name)) throw std::invalid_argument("invalid value name '" + *name + "'");
  auto* v = new Value(n, offset, std::move(type));
  try {
    claimName(v, name ? *name : freshName(), /*explicit_name=*/name != nullptr);
  } catch (...) {
    delete v;
    throw;
  }
  all_values_.insert(v);
  return v;
}

void Graph::freeValue(Value* v) {
  if (auto it = names_.find(v->name_); it != names_.end() && it->second == v) names_.erase(it);
  all_values_.erase(v);
  delete v;
}

void Graph::freeNode(Node* n) {
  if (insert_before_ == n) insert_before_ = block_->returnNode();
  all_nodes_.erase(n);
  delete n;
}

void Graph::freeBlock(Block* b) {
  // Later nodes may use earlier ones: drop the block's uses first, then delete back to front.
  b->return_->removeAllInputs();
  for (Node* n = b->return_->prev_; n != b->param_;) {
    Node* prev = n->prev_;
    for (Value* o : n->outputs_) o->uses_.clear();  // users are in this block and die too
    n->destroy();
    n = prev;
  }
  for (Value* o : b->param_->outputs_) {
    o->uses_.clear();
    freeValue(o);
  }
  b->param_->outputs_.clear();
  freeNode(b->param_);
  freeNode(b->return_);
  all_blocks_.erase(b);
  delete b;
}

bool Graph::isValidName(std::string_view name) const {
  if (name.empty()) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-' || static_cast<unsigned char>(c) >= 0x80;
  });
}

// Registers `name` for v. A value that still carries the numeric name it got
// at creation gives the name up (and gets a fresh one); any other holder is a conflict.
void Graph::claimName(Value* v, const std::string& name, bool explicit_name) {
  auto [it, inserted] = names_.try_emplace(name, v);
  if (!inserted) {
    Value* other = it->second;
    if (!other->auto_named_) throw std::invalid_argument("value name '%" + name + "' is already defined");
    other->name_ = freshName();
    names_.emplace(other->name_, other);
    it->second = v;
  }
  v->name_ = name;
  v->auto_named_ = !explicit_name;
}

void Graph::renameValue(Value* v, const std::string& name) {
  if (v->name_ == name) return;
  if (!isValidName(name)) throw std::invalid_argument("invalid value name '" + name + "'");
  std::string old = v->name_;
  claimName(v, name, true);
  names_.erase(old);
}

Value* Graph::findValue(std::string_view name) const {
  auto it = names_.find(std::string(name));
  return it == names_.end() ? nullptr : it->second;
}

std::string Graph::freshName() {
  std::string s;
  do s = std::to_string(next_fresh_++); while (names_.count(s));
  return s;
}

void Graph::forEachNode(const std::function<void(Node*)>& fn) const {
  std::function<void(const Block*)> walk = [&](const Block* b) {
    for (Node* n : b->nodes()) {
      fn(n);
      for (Block* sub : n->blocks()) walk(sub);
    }
  };
  walk(block_);
}

namespace {
AttrValue cloneAttr(const AttrValue& a) {
  if (a.is<std::shared_ptr<Graph>>()) return AttrValue(a.get<std::shared_ptr<Graph>>()->copy());
  if (a.is<AttrList>()) {
    AttrList out;
    for (const auto& x : a.get<AttrList>()) out.push_back(cloneAttr(x));
    AttrValue copy = a;  // keeps the annotation and the list/tuple/dict form
    copy.v = std::move(out);
    return copy;
  }
  return a;
}

void cloneBlock(const Block* from, Block* to, std::unordered_map<const Value*, Value*>& map) {
  Graph* g = to->owningGraph();
  for (Value* in : from->inputs()) map[in] = to->addInput(in->debugName(), in->type());
  for (Node* n : from->nodes()) {
    Node* c = g->create(n->kind(), 0);
    for (Value* in : n->inputs()) c->addInput(map.at(in));
    for (Value* o : n->outputs()) map[o] = c->addOutput(o->type())->setDebugName(o->debugName());
    for (const auto& [k, v] : n->attributes()) c->setAttr(k, cloneAttr(v));
    c->setScope(n->scope());
    c->setSource(n->source());
    to->appendNode(c);
    for (Block* b : n->blocks()) cloneBlock(b, c->addBlock(), map);
  }
  for (Value* out : from->outputs()) to->registerOutput(map.at(out));
  for (const auto& [k, v] : from->returnNode()->attributes()) to->returnNode()->setAttr(k, cloneAttr(v));
}
}  // namespace

std::vector<Value*> insertGraph(Graph& g, const Graph& callee, const std::vector<Value*>& inputs, Node* before) {
  if (inputs.size() != callee.inputs().size())
    throw std::invalid_argument("insertGraph: " + std::to_string(inputs.size()) + " inputs for a graph taking " +
                                std::to_string(callee.inputs().size()));
  std::unordered_map<const Value*, Value*> map;
  for (size_t i = 0; i < inputs.size(); ++i) map[callee.inputs()[i]] = inputs[i];
  std::function<void(const Block*, Block*, Node*)> clone = [&](const Block* from, Block* to, Node* at) {
    for (Node* n : from->nodes()) {
      Node* c = g.create(n->kind(), 0);
      for (Value* in : n->inputs()) c->addInput(map.at(in));
      for (Value* o : n->outputs()) {
        Value* v = c->addOutput(o->type());
        if (!g.findValue(o->debugName())) v->setDebugName(o->debugName());
        map[o] = v;
      }
      for (const auto& [k, v] : n->attributes()) c->setAttr(k, cloneAttr(v));
      c->setScope(n->scope());
      c->setSource(n->source());
      if (at) c->insertBefore(at); else to->appendNode(c);
      for (const Block* b : n->blocks()) {
        Block* nb = c->addBlock();
        for (Value* in : b->inputs()) map[in] = nb->addInput(g.findValue(in->debugName()) ? "" : in->debugName(), in->type());
        clone(b, nb, nullptr);
        for (Value* out : b->outputs()) nb->registerOutput(map.at(out));
      }
    }
  };
  clone(callee.block(), before->owningBlock(), before);
  std::vector<Value*> outs;
  for (Value* o : callee.outputs()) outs.push_back(map.at(o));
  return outs;
}

std::shared_ptr<Graph> Graph::copy() const {
  auto g = std::make_shared<Graph>();
  std::unordered_map<const Value*, Value*> map;
  cloneBlock(block_, g->block(), map);
  return g;
}

}  // namespace llga
