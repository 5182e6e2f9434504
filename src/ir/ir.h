// The graph IR: Graph, Block, Node, Value, in the spirit of TorchScript's ir.h.
//
// Invariants (checked by verify(), see verifier.h):
//  * Ownership. A Graph owns every Node, Value and Block created through it;
//    they live until destroyed explicitly or until the Graph dies. Handles
//    are raw pointers; a destroyed node's pointer must not be used again.
//  * Use-lists. For every input i of node n, n->inputs()[i]->uses() contains
//    exactly one Use{n, i}, and every Use of a value is such an input.
//  * Blocks. A Block is a list of nodes between two sentinels: its param
//    node (whose outputs are the block's inputs) and its return node (whose
//    inputs are the block's outputs). The graph has one top block; prim::If
//    and prim::Loop nodes own nested blocks.
//  * Topological order. Within a block, every node's inputs are defined
//    earlier in the same block, in an enclosing block, or are params of an
//    enclosing block. Node::isBefore is O(1) (positions with gaps).
//  * Names. Each value has a debug name, unique in its graph ("x.1", "31",
//    "block1-0"): letters, digits, "_", ".", "-" and non-ASCII bytes.
//    Subgraphs (fusion groups) are separate Graphs with their own names.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/attributes.h"
#include "ir/symbol.h"
#include "ir/type.h"

namespace llga {

class Graph;
class Block;
class Node;
class Value;

struct Use {
  Node* user;
  size_t offset;
  bool operator==(const Use& o) const { return user == o.user && offset == o.offset; }
};

class Value {
 public:
  Node* node() const { return node_; }  // producer (a prim::Param node for block inputs)
  size_t offset() const { return offset_; }
  const TypePtr& type() const { return type_; }
  Value* setType(TypePtr t);
  const std::string& debugName() const { return name_; }
  // Renames; throws std::invalid_argument if the name is taken or malformed.
  Value* setDebugName(const std::string& name);
  const std::vector<Use>& uses() const { return uses_; }
  bool hasUses() const { return !uses_.empty(); }
  Graph* owningGraph() const;
  // Given:   %b = f(%a); %c = g(%a)     Execute: a->replaceAllUsesWith(x)
  // Result:  %b = f(%x); %c = g(%x)     (the types are not checked)
  void replaceAllUsesWith(Value* v);

 private:
  friend class Node;
  friend class Graph;
  Value(Node* node, size_t offset, TypePtr type) : node_(node), offset_(offset), type_(std::move(type)) {}
  Node* node_;
  size_t offset_;
  TypePtr type_;
  std::string name_;
  bool auto_named_ = true;  // still has the numeric name it was created with
  std::vector<Use> uses_;
};

class Node {
 public:
  Symbol kind() const { return kind_; }
  // Only for the parser: group kinds are printed with a numeric suffix
  // (prim::FooGroup_0) that it strips once the subgraph is known.
  void setKind(Symbol k) { kind_ = k; }
  Graph* owningGraph() const { return graph_; }
  Block* owningBlock() const { return owning_block_; }
  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  Value* input(size_t i) const { return inputs_.at(i); }
  Value* output(size_t i = 0) const { return outputs_.at(i); }
  const std::vector<Block*>& blocks() const { return blocks_; }
  Node* next() const { return next_; }
  Node* prev() const { return prev_; }
  bool inBlockList() const { return next_ != nullptr; }

  // Attributes
  const Attributes& attributes() const { return attrs_; }
  Attributes& attributes() { return attrs_; }
  bool hasAttribute(Symbol name) const { return attrs_.has(name); }
  const AttrValue& attr(Symbol name) const { return attrs_.get(name); }
  Node* setAttr(Symbol name, AttrValue v) { attrs_.set(name, std::move(v)); return this; }
  // The subgraph of a group node (a Graph-valued attr::Subgraph), or null.
  std::shared_ptr<Graph> subgraph() const;

  // Debug information carried through passes.
  const std::string& scope() const { return scope_; }  // "__module.layer1/__module.layer1.0"
  void setScope(std::string s) { scope_ = std::move(s); }
  const std::string& source() const { return source_; }  // "file.py:12:8" as printed
  void setSource(std::string s) { source_ = std::move(s); }
  // Innermost module of the scope: "__module.layer1.0.conv1" -> "layer1.0.conv1".
  std::string scopeLeaf() const;

  // Inputs and outputs. Use-lists are kept up to date.
  Value* addInput(Value* v);
  void insertInput(size_t i, Value* v);
  void replaceInput(size_t i, Value* v);
  void replaceInputWith(Value* from, Value* to);  // every occurrence
  void removeInput(size_t i);
  void removeAllInputs();
  Value* addOutput(TypePtr type = nullptr);
  // An output with the given debug name (throws like Value::setDebugName).
  Value* addOutput(TypePtr type, const std::string& name);
  void eraseOutput(size_t i);  // the output must have no uses
  Block* addBlock();

  // Placement. `this` must not be in a list already (or use move*).
  Node* insertBefore(Node* n);
  Node* insertAfter(Node* n);
  void moveBefore(Node* n);
  void moveAfter(Node* n);
  bool isBefore(const Node* n) const;  // both in the same block
  // Unlinks and deletes the node and its blocks. Outputs must have no uses.
  void destroy();

  // One line in TorchScript's format (without nested blocks).
  std::string str() const;

 private:
  friend class Graph;
  friend class Block;
  friend class Value;
  Node(Graph* g, Symbol kind) : graph_(g), kind_(kind) {}
  void dropInputUse(size_t i);
  void assignTopoPosition();

  Graph* graph_;
  Symbol kind_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  std::vector<Block*> blocks_;
  Block* owning_block_ = nullptr;
  Node* next_ = nullptr;
  Node* prev_ = nullptr;
  int64_t topo_position_ = 0;
  Attributes attrs_;
  std::string scope_;
  std::string source_;
};

// Forward iteration over the nodes of one block (not into nested blocks).
class NodeRange {
 public:
  class iterator {
   public:
    explicit iterator(Node* n) : n_(n) {}
    Node* operator*() const { return n_; }
    iterator& operator++() { n_ = n_->next(); return *this; }
    bool operator!=(const iterator& o) const { return n_ != o.n_; }
    bool operator==(const iterator& o) const { return n_ == o.n_; }
   private:
    Node* n_;
  };
  NodeRange(Node* first, Node* end) : first_(first), end_(end) {}
  iterator begin() const { return iterator(first_); }
  iterator end() const { return iterator(end_); }
 private:
  Node* first_;
  Node* end_;
};

class Block {
 public:
  Graph* owningGraph() const { return graph_; }
  Node* owningNode() const { return owning_node_; }  // null for the graph's top block
  const std::vector<Value*>& inputs() const;
  const std::vector<Value*>& outputs() const;
  Node* paramNode() const { return param_; }
  Node* returnNode() const { return return_; }
  NodeRange nodes() const { return NodeRange(param_->next(), return_); }
  bool empty() const { return param_->next() == return_; }

  Value* addInput(std::string name = "", TypePtr type = nullptr);
  void eraseInput(size_t i);
  size_t registerOutput(Value* v);
  void eraseOutput(size_t i);
  Node* appendNode(Node* n) { return n->insertBefore(return_); }
  Node* prependNode(Node* n) { return n->insertAfter(param_); }

 private:
  friend class Graph;
  friend class Node;
  Block(Graph* g, Node* owner);
  void reindexTopology();
  Graph* graph_;
  Node* owning_node_;
  Node* param_;
  Node* return_;
};

class Graph : public std::enable_shared_from_this<Graph> {
 public:
  Graph();
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  Block* block() const { return block_; }
  const std::vector<Value*>& inputs() const { return block_->inputs(); }
  const std::vector<Value*>& outputs() const { return block_->outputs(); }
  NodeRange nodes() const { return block_->nodes(); }
  Value* addInput(std::string name = "", TypePtr type = nullptr) { return block_->addInput(std::move(name), std::move(type)); }
  size_t registerOutput(Value* v) { return block_->registerOutput(v); }
  Node* returnNode() const { return block_->returnNode(); }  // its attributes: what passes proved of the whole graph

  // Creates a node that is not in any block yet (use insertNode / appendNode).
  Node* create(Symbol kind, size_t num_outputs = 1);
  Node* create(Symbol kind, const std::vector<Value*>& inputs, size_t num_outputs = 1);
  Node* appendNode(Node* n) { return block_->appendNode(n); }
  // Insertion point: new nodes go before it (default: the end of the top block).
  void setInsertPoint(Node* before) { insert_before_ = before; }
  Node* insertPoint() const { return insert_before_; }
  Node* insertNode(Node* n) { return n->insertBefore(insert_before_); }
  // prim::Constant with a value attribute, inserted at the insertion point.
  Value* insertConstant(AttrValue value, TypePtr type);

  // Names
  Value* findValue(std::string_view name) const;
  std::string freshName();  // an unused numeric name
  bool isValidName(std::string_view name) const;

  // Every node of every block, depth first, in program order.
  void forEachNode(const std::function<void(Node*)>& fn) const;
  size_t numNodes() const { return all_nodes_.size(); }  // including sentinels

  std::shared_ptr<Graph> copy() const;
  std::string toString() const;  // TorchScript format (printer.cpp)
  void print(std::ostream& os) const;

 private:
  friend class Node;
  friend class Block;
  friend class Value;
  Value* newValue(Node* n, size_t offset, TypePtr type, const std::string* name = nullptr);
  void freeValue(Value* v);
  void freeNode(Node* n);
  void freeBlock(Block* b);
  void renameValue(Value* v, const std::string& name);
  void claimName(Value* v, const std::string& name, bool explicit_name);

  Block* block_;
  Node* insert_before_;
  std::unordered_set<Node*> all_nodes_;
  std::unordered_set<Value*> all_values_;
  std::unordered_set<Block*> all_blocks_;
  std::unordered_map<std::string, Value*> names_;
  uint64_t next_fresh_ = 0;
};

std::ostream& operator<<(std::ostream& os, const Graph& g);

// Copies `callee`'s body before `before` (in its block), its inputs bound to
// `inputs`; returns the values that stand for its outputs. Value names are
// kept where they are free in `g`.
std::vector<Value*> insertGraph(Graph& g, const Graph& callee, const std::vector<Value*>& inputs, Node* before);

}  // namespace llga
