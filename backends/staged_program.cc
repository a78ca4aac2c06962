#include "backends/staged_program.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/container/inlined_vector.h"

#include "base/checked.h"
#include "base/errors.h"
#include "base/stop.h"
#include "base/status_macros.h"
#include "base/strings.h"
#include "compiler/executable/artifact_json.h"

namespace accy::backends {

using tensor::Node;
using tensor::OpCode;

struct StagedProgram::Stage {
  // kScanChunks: a scan run as launches of its one-kernel form over `chunk`
  // steps at a time (`program`), the last `length % chunk` steps by `tail`.
  enum class Kind { kProgram, kScan, kWhile, kScanChunks };
  Kind kind = Kind::kProgram;
  std::shared_ptr<const LoadedProgram> program;  // kProgram, kScanChunks
  std::shared_ptr<const LoadedProgram> tail;     // kScanChunks, when length % chunk > 0
  int64_t chunk = 0;                             // kScanChunks
  std::vector<int32_t> inputs, outputs;          // slots
  std::shared_ptr<const StagedProgram> body, condition;
  int64_t length = 0;
  size_t carries = 0, xs = 0;
  std::vector<size_t> xs_axis;  // kScan: the position of the loop's axis in each xs value
};

StagedProgram::StagedProgram() = default;
StagedProgram::~StagedProgram() = default;

namespace {

bool isLoop(OpCode op) { return op == OpCode::kScan || op == OpCode::kWhileLoop; }

// Appends to a stage's `program` its next input, of `like`'s dtype and
// axes; returns its node.
int32_t addInput(tensor::Program& program, const Node& like) {
  Node in;
  in.op = OpCode::kInput;
  in.dtype = like.dtype;
  in.axes = like.axes;
  in.ints = {static_cast<int64_t>(program.inputs.size())};
  const int32_t id = static_cast<int32_t>(program.nodes.size());
  program.inputs.push_back(id);
  program.nodes.push_back(std::move(in));
  return id;
}

// The buffers of one plan's slots, made once per run of the loop that
// runs it (not once per step): storage for every slot, and the views the
// stages read and write (the plan's inputs, and where they can be its
// outputs, bound to the caller's buffers instead).
struct Frame {
  std::vector<std::vector<std::byte>> own;
  std::vector<std::span<std::byte>> views;
};

}  // namespace

// Offers the scan node `id` of `p` to `load` as a program of its own (one
// scan: choir::isScanProgram). When the loader takes it, appends it as an
// ordinary stage, fills `results` with its results' slots and returns
// true; when it answers Unimplemented (the scan does not fit one kernel
// there), returns false and leaves the plan as it was.
namespace {

// The most nodes a scan's body may have to run as one kernel.
constexpr size_t kMaxScanKernelNodes = 256;

// The scan node `n` of `p` alone in a program of its own, over `length`
// steps: its inputs the scan's operands (xs with the loop's axis of extent
// `length`), its outputs the scan's results (ys likewise).
absl::StatusOr<tensor::Program> scanProgram(const tensor::Program& p, const Node& n, int64_t length,
                                            std::string name) {
  tensor::Program program;
  program.name = std::move(name);
  const size_t carries = static_cast<size_t>(n.ints[1]), xs = static_cast<size_t>(n.ints[2]);
  Node scan = n;
  scan.operands.clear();
  for (size_t k = 0; k < n.operands.size(); ++k) {
    Node like = p.nodes[static_cast<size_t>(n.operands[k])];
    if (k >= carries && k < carries + xs) {
      for (tensor::Axis& a : like.axes) {
        if (a.name == n.names[0]) a.extent = length;
      }
    }
    scan.operands.push_back(addInput(program, like));
  }
  scan.ints[0] = 0;
  scan.ints[3] = length;
  program.bodies.push_back(p.bodies[static_cast<size_t>(n.ints[0])]);
  const int32_t at = static_cast<int32_t>(program.nodes.size());
  program.nodes.push_back(scan);
  for (size_t k = 0; k < program.bodies[0].outputs.size(); ++k) {
    ACCY_ASSIGN_OR_RETURN(tensor::Spec spec,
                          tensor::loopResultSpec(program.nodes, scan, static_cast<int64_t>(k), program.bodies));
    Node r;
    r.op = OpCode::kLoopResult;
    r.dtype = spec.dtype;
    r.axes = spec.axes;
    r.operands = {at};
    r.ints = {static_cast<int64_t>(k)};
    program.outputs.push_back(static_cast<int32_t>(program.nodes.size()));
    program.nodes.push_back(std::move(r));
  }
  return program;
}

// Fills a scan stage's counts from the scan node `n` of `p`: carries, xs,
// length, and the position of the loop's axis in each xs value.
void describeScan(const tensor::Program& p, const Node& n, StagedProgram::Stage& stage) {
  stage.carries = static_cast<size_t>(n.ints[1]);
  stage.xs = static_cast<size_t>(n.ints[2]);
  stage.length = n.ints[3];
  for (size_t j = 0; j < stage.xs; ++j) {
    const std::vector<tensor::Axis>& axes = p.nodes[n.operands[stage.carries + j]].axes;
    size_t at = 0;
    while (axes[at].name != n.names[0]) ++at;
    stage.xs_axis.push_back(at);
  }
}

}  // namespace

int64_t stepWork(const tensor::Program& body) {
  int64_t work = 0;
  for (const Node& n : body.nodes) {
    if (n.op == OpCode::kInput || n.op == OpCode::kConstant) continue;
    int64_t elements = n.spec().elementCount();
    for (int32_t o : n.operands) elements = std::max(elements, body.nodes[static_cast<size_t>(o)].spec().elementCount());
    const int64_t weight = tensor::opCost(n.op) == tensor::OpCost::Expensive ? 16 : 1;
    // Saturates: a body this large runs step by step whatever the budget.
    const std::optional<int64_t> node_work = checkedMul(elements, weight);
    const std::optional<int64_t> total = node_work ? checkedAdd(work, *node_work) : std::nullopt;
    if (!total) return INT64_MAX;
    work = *total;
  }
  return work;
}

absl::StatusOr<bool> StagedProgram::loadScanKernel(const tensor::Program& p, int32_t id,
                                                   std::vector<int32_t>& slot_of, const StageLoader& load,
                                                   StagedProgram& plan, std::vector<int32_t>& results,
                                                   int64_t max_work) {
  const Node& n = p.nodes[static_cast<size_t>(id)];
  const tensor::Program& body = p.bodies[static_cast<size_t>(n.ints[0])];
  const int64_t length = n.ints[3];
  // A body of many nodes runs step by step: as one kernel it would be one
  // machine-code function that the emitter's register allocator takes
  // seconds over with no stop check inside (1,000 transcendental functions:
  // 1.6 s), where fusion cuts the stepped body's kernels at this size. Its
  // steps are long enough that running them one by one costs little.
  if (hasLoops(body) || length < 1 || body.nodes.size() > kMaxScanKernelNodes) return false;
  // Steps per launch: all of them, or as many as fit the work between two
  // stop checks (none: a single step is more, so run step by step).
  int64_t chunk = length;
  if (max_work > 0) {
    const int64_t step = std::max<int64_t>(1, stepWork(body));
    if (step > max_work) return false;
    chunk = std::min(length, max_work / step);
  }
  ACCY_ASSIGN_OR_RETURN(tensor::Program program,
                        scanProgram(p, n, chunk, strCat(p.name, "_scan", plan.stages_.size())));
  auto loaded = load(program);
  if (absl::IsUnimplemented(loaded.status())) return false;
  if (!loaded.ok()) return loaded.status();
  Stage stage;
  stage.program = std::move(*loaded);
  if (chunk < length) {
    stage.kind = Stage::Kind::kScanChunks;
    stage.chunk = chunk;
    describeScan(p, n, stage);
    if (const int64_t rest = length % chunk; rest > 0) {
      ACCY_ASSIGN_OR_RETURN(tensor::Program tail,
                            scanProgram(p, n, rest, strCat(p.name, "_scan", plan.stages_.size(), "_tail")));
      auto loaded_tail = load(tail);
      if (!loaded_tail.ok()) return loaded_tail.status();
      stage.tail = std::move(*loaded_tail);
    }
  }
  for (int32_t o : n.operands) stage.inputs.push_back(slot_of[o]);
  for (size_t k = 0; k < body.outputs.size(); ++k) {
    ACCY_ASSIGN_OR_RETURN(tensor::Spec spec, tensor::loopResultSpec(p.nodes, n, static_cast<int64_t>(k), p.bodies));
    plan.slots_.push_back(std::move(spec));
    results.push_back(static_cast<int32_t>(plan.slots_.size() - 1));
  }
  stage.outputs = results;
  plan.stages_.push_back(std::move(stage));
  return true;
}

bool hasLoops(const tensor::Program& program) {
  for (const Node& n : program.nodes) {
    if (isLoop(n.op)) return true;
  }
  return false;
}

absl::StatusOr<std::shared_ptr<const StagedProgram>> StagedProgram::build(const tensor::Program& p,
                                                                          const StageLoader& load,
                                                                          const StageOptions& options) {
  ACCY_RETURN_IF_ERROR(tensor::validateProgram(p));
  auto plan = std::make_shared<StagedProgram>();
  plan->input_specs_ = p.inputSpecs();
  plan->output_specs_ = p.outputSpecs();
  std::vector<int32_t> slot_of(p.nodes.size(), -1);
  auto newSlot = [&](const tensor::Spec& spec) {
    plan->slots_.push_back(spec);
    return static_cast<int32_t>(plan->slots_.size() - 1);
  };
  for (int32_t id : p.inputs) {
    slot_of[id] = newSlot(p.nodes[id].spec());
    plan->inputs_.push_back(slot_of[id]);
  }
  // Which nodes are read after `i` by a node outside the stretch being
  // gathered, or are outputs: a stretch exports those.
  std::vector<int32_t> last_user(p.nodes.size(), -1);
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    for (int32_t o : p.nodes[i].operands) last_user[o] = std::max(last_user[o], static_cast<int32_t>(i));
  }
  std::set<int32_t> outputs(p.outputs.begin(), p.outputs.end());
  std::vector<int32_t> stretch;
  std::map<int32_t, std::vector<int32_t>> loop_slots;  // loop node -> its results' slots

  auto flush = [&]() -> absl::Status {
    if (stretch.empty()) return absl::OkStatus();
    const int32_t end = stretch.back();
    std::set<int32_t> inside(stretch.begin(), stretch.end());
    tensor::Program program;
    program.name = strCat(p.name, "_stage", plan->stages_.size());
    std::map<int32_t, int32_t> local;  // node of p -> node of the stage's program
    Stage stage;
    // What the stretch reads from outside it and what it exports, the
    // program's own inputs and outputs first, in the program's order (a
    // loop body of one stretch then is that stretch's program exactly:
    // directProgram()), the rest in node order.
    auto rank = [](const std::vector<int32_t>& order, int32_t id) {
      const auto at = std::find(order.begin(), order.end(), id);
      return std::pair<int64_t, int32_t>(at != order.end() ? at - order.begin() : int64_t{1} << 40, id);
    };
    std::vector<int32_t> reads;
    for (int32_t id : stretch) {
      for (int32_t o : p.nodes[id].operands) {
        if (inside.count(o) == 0 && std::find(reads.begin(), reads.end(), o) == reads.end()) reads.push_back(o);
      }
    }
    std::stable_sort(reads.begin(), reads.end(),
                     [&](int32_t a, int32_t b) { return rank(p.inputs, a) < rank(p.inputs, b); });
    for (int32_t o : reads) {
      if (slot_of[o] < 0) {
        return makeError(ErrorKind::kInvalidProgram, strCat("staging ", p.name, ": node %", o, " has no slot"));
      }
      local[o] = addInput(program, p.nodes[o]);
      stage.inputs.push_back(slot_of[o]);
    }
    for (int32_t id : stretch) {
      Node copy = p.nodes[id];
      for (int32_t& o : copy.operands) o = local.at(o);
      local[id] = static_cast<int32_t>(program.nodes.size());
      program.nodes.push_back(std::move(copy));
    }
    std::vector<int32_t> exports;
    for (int32_t id : stretch) {
      if (last_user[id] > end || outputs.count(id) > 0) exports.push_back(id);
    }
    std::stable_sort(exports.begin(), exports.end(),
                     [&](int32_t a, int32_t b) { return rank(p.outputs, a) < rank(p.outputs, b); });
    for (int32_t id : exports) {
      program.outputs.push_back(local.at(id));
      slot_of[id] = newSlot(p.nodes[id].spec());
      stage.outputs.push_back(slot_of[id]);
    }
    stretch.clear();
    if (program.outputs.empty()) return absl::OkStatus();  // nothing read later
    auto loaded = load(program);
    if (!loaded.ok()) return loaded.status();
    stage.program = std::move(*loaded);
    plan->stages_.push_back(std::move(stage));
    return absl::OkStatus();
  };

  for (size_t i = 0; i < p.nodes.size(); ++i) {
    const Node& n = p.nodes[i];
    const int32_t id = static_cast<int32_t>(i);
    if (n.op == OpCode::kInput) continue;
    if (n.op == OpCode::kLoopResult) {
      slot_of[id] = loop_slots.at(n.operands[0])[n.ints[0]];
      continue;
    }
    if (!isLoop(n.op)) {
      stretch.push_back(id);
      continue;
    }
    ACCY_RETURN_IF_ERROR(flush());
    const bool scan = n.op == OpCode::kScan;
    if (scan && options.scans_in_kernel) {
      ACCY_ASSIGN_OR_RETURN(bool loaded,
                            loadScanKernel(p, id, slot_of, load, *plan, loop_slots[id], options.scan_kernel_work));
      if (loaded) continue;
    }
    Stage stage;
    stage.kind = scan ? Stage::Kind::kScan : Stage::Kind::kWhile;
    for (int32_t o : n.operands) stage.inputs.push_back(slot_of[o]);
    if (scan) {
      describeScan(p, n, stage);
      ACCY_ASSIGN_OR_RETURN(stage.body, build(p.bodies[n.ints[0]], load, options));
    } else {
      stage.carries = static_cast<size_t>(n.ints[2]);
      ACCY_ASSIGN_OR_RETURN(stage.condition, build(p.bodies[n.ints[0]], load, options));
      ACCY_ASSIGN_OR_RETURN(stage.body, build(p.bodies[n.ints[1]], load, options));
    }
    const size_t results = scan ? p.bodies[n.ints[0]].outputs.size() : stage.carries;
    std::vector<int32_t>& slots = loop_slots[id];
    for (size_t k = 0; k < results; ++k) {
      ACCY_ASSIGN_OR_RETURN(tensor::Spec spec,
                            tensor::loopResultSpec(p.nodes, n, static_cast<int64_t>(k), p.bodies));
      slots.push_back(newSlot(spec));
    }
    stage.outputs = slots;
    plan->stages_.push_back(std::move(stage));
  }
  ACCY_RETURN_IF_ERROR(flush());
  for (int32_t id : p.outputs) plan->outputs_.push_back(slot_of[id]);
  for (const Stage& s : plan->stages_) {
    if (s.program && plan->info_.target.empty()) plan->info_.target = s.program->executable().target;
    for (const auto& inner : {s.body, s.condition}) {
      if (inner && plan->info_.target.empty()) plan->info_.target = inner->info_.target;
    }
  }
  plan->info_.inputs = plan->input_specs_;
  plan->info_.outputs = plan->output_specs_;
  plan->info_.artifact_plan.scratch_bytes = plan->memoryBytes();
  return std::shared_ptr<const StagedProgram>(std::move(plan));
}

int64_t StagedProgram::memoryBytes() const {
  int64_t bytes = 0;
  std::set<int32_t> in(inputs_.begin(), inputs_.end());
  for (size_t s = 0; s < slots_.size(); ++s) {
    if (in.count(static_cast<int32_t>(s)) == 0) bytes += slots_[s].byteSize();
  }
  for (const Stage& s : stages_) {
    if (s.program) bytes += s.program->executable().artifact_plan.scratch_bytes;
    if (s.tail) bytes += s.tail->executable().artifact_plan.scratch_bytes;
    if (s.kind == Stage::Kind::kScanChunks) {  // the xs gathered one chunk at a time
      for (size_t j = 0; j < s.xs; ++j) {
        if (s.xs_axis[j] != 0) bytes += slots_[s.inputs[s.carries + j]].byteSize() / s.length * s.chunk;
      }
    }
    if (s.body) bytes += s.body->memoryBytes();
    if (s.condition) bytes += s.condition->memoryBytes();
    for (size_t i = 0; i < s.carries && s.kind != Stage::Kind::kProgram; ++i) bytes += slots_[s.outputs[i]].byteSize();
  }
  return bytes;
}

absl::StatusOr<std::string> StagedProgram::planJson(
    const std::function<absl::StatusOr<std::string>(const LoadedProgram&)>& artifact) const {
  auto list = [](const auto& values) {
    std::string out = "[";
    for (size_t i = 0; i < values.size(); ++i) strAppend(&out, i ? ", " : "", values[i]);
    return out + "]";
  };
  std::string slots = "[";
  for (size_t s = 0; s < slots_.size(); ++s) strAppend(&slots, s ? ",\n   " : "", executable::specJson(slots_[s]));
  std::string out = strCat("{\"slots\": ", slots, "],\n \"inputs\": ", list(inputs_), ", \"outputs\": ", list(outputs_),
                           ",\n \"stages\": [");
  for (size_t i = 0; i < stages_.size(); ++i) {
    const Stage& st = stages_[i];
    if (st.kind == Stage::Kind::kScanChunks) {
      return makeError(ErrorKind::kUnimplemented,
                       "a plan whose scans run in chunks (StageOptions::scan_kernel_work) has no JSON form");
    }
    strAppend(&out, i ? ",\n" : "\n", "{\"kind\": \"",
              st.kind == Stage::Kind::kProgram ? "program" : st.kind == Stage::Kind::kScan ? "scan" : "while",
              "\", \"inputs\": ", list(st.inputs), ", \"outputs\": ", list(st.outputs));
    if (st.kind == Stage::Kind::kProgram) {
      ACCY_ASSIGN_OR_RETURN(const std::string a, artifact(*st.program));
      strAppend(&out, ",\n \"artifact\": ", a, "}");
      continue;
    }
    strAppend(&out, ", \"carries\": ", st.carries);
    if (st.kind == Stage::Kind::kScan) {
      strAppend(&out, ", \"length\": ", st.length, ", \"xs\": ", st.xs, ", \"xs_axis\": ", list(st.xs_axis));
    } else {
      ACCY_ASSIGN_OR_RETURN(const std::string c, st.condition->planJson(artifact));
      strAppend(&out, ",\n \"condition\": ", c);
    }
    ACCY_ASSIGN_OR_RETURN(const std::string b, st.body->planJson(artifact));
    strAppend(&out, ",\n \"body\": ", b, "}");
  }
  return out + "]}";
}

int64_t StagedProgram::loadedStages() const {
  int64_t count = 0;
  for (const Stage& s : stages_) {
    count += (s.program ? 1 : 0) + (s.tail ? 1 : 0);
    if (s.body) count += s.body->loadedStages();
    if (s.condition) count += s.condition->loadedStages();
  }
  return count;
}

int64_t StagedProgram::steppedLoops() const {
  int64_t count = 0;
  for (const Stage& s : stages_) {
    count += s.kind == Stage::Kind::kProgram || s.kind == Stage::Kind::kScanChunks ? 0 : 1;
    if (s.body) count += s.body->steppedLoops();
    if (s.condition) count += s.condition->steppedLoops();
  }
  return count;
}

int64_t StagedProgram::chunkedScans() const {
  int64_t count = 0;
  for (const Stage& s : stages_) {
    count += s.kind == Stage::Kind::kScanChunks ? 1 : 0;
    if (s.body) count += s.body->chunkedScans();
    if (s.condition) count += s.condition->chunkedScans();
  }
  return count;
}

int64_t StagedProgram::codeBytes() const {
  int64_t bytes = 0;
  for (const Stage& s : stages_) {
    if (s.program) bytes += static_cast<int64_t>(s.program->executable().code.size());
    if (s.tail) bytes += static_cast<int64_t>(s.tail->executable().code.size());
    if (s.body) bytes += s.body->codeBytes();
    if (s.condition) bytes += s.condition->codeBytes();
  }
  return bytes;
}

namespace {

Frame makeFrame(const std::vector<tensor::Spec>& slots, const std::vector<int32_t>& inputs) {
  Frame f;
  f.own.resize(slots.size());
  f.views.resize(slots.size());
  std::set<int32_t> in(inputs.begin(), inputs.end());
  for (size_t s = 0; s < slots.size(); ++s) {
    if (in.count(static_cast<int32_t>(s)) > 0) continue;
    f.own[s].resize(static_cast<size_t>(slots[s].byteSize()));
    f.views[s] = std::span<std::byte>(f.own[s]);
  }
  return f;
}

}  // namespace

// One run of a (body) plan on `frame`, its inputs and outputs given: the
// inputs are bound as they are; an output produced by a stage is written
// in place where it is the first output naming its slot, else copied.
class PlanRunner {
 public:
  PlanRunner(const std::vector<tensor::Spec>& slots, const std::vector<int32_t>& inputs,
             const std::vector<int32_t>& outputs)
      : inputs_(inputs), outputs_(outputs), frame_(makeFrame(slots, inputs)) {
    std::set<int32_t> in(inputs.begin(), inputs.end());
    std::set<int32_t> seen;
    for (int32_t s : outputs) direct_.push_back(in.count(s) == 0 && seen.insert(s).second);
  }

  template <typename Stages>
  absl::Status run(absl::Span<const std::span<const std::byte>> ins, absl::Span<const std::span<std::byte>> outs,
                   const Stages& stages) {
    for (size_t i = 0; i < inputs_.size(); ++i) {
      // Input slots are only read: no stage writes a slot it did not make.
      frame_.views[inputs_[i]] = std::span<std::byte>(const_cast<std::byte*>(ins[i].data()), ins[i].size());
    }
    for (size_t k = 0; k < outputs_.size(); ++k) {
      const int32_t s = outputs_[k];
      if (direct_[k]) frame_.views[s] = outs[k];
    }
    ACCY_RETURN_IF_ERROR(stages(frame_.views));
    for (size_t k = 0; k < outputs_.size(); ++k) {
      if (direct_[k]) continue;
      const std::span<std::byte> from = frame_.views[outputs_[k]];
      if (outs[k].data() != from.data()) std::memcpy(outs[k].data(), from.data(), from.size());
    }
    // Rebind the outputs written in place to this frame's own buffers.
    for (size_t k = 0; k < outputs_.size(); ++k) {
      if (direct_[k]) frame_.views[outputs_[k]] = std::span<std::byte>(frame_.own[outputs_[k]]);
    }
    return absl::OkStatus();
  }

 private:
  const std::vector<int32_t>& inputs_;
  const std::vector<int32_t>& outputs_;
  Frame frame_;
  std::vector<bool> direct_;
};

absl::Status StagedProgram::launch(absl::Span<const std::span<const std::byte>> inputs,
                                   absl::Span<const std::span<std::byte>> outputs) const {
  if (inputs.size() != input_specs_.size() || outputs.size() != output_specs_.size()) {
    return makeError(ErrorKind::kInvalidBuffer, strCat("launch: the program takes ", input_specs_.size(),
                                                       " inputs and ", output_specs_.size(), " outputs, got ",
                                                       inputs.size(), " and ", outputs.size()));
  }
  auto check = [](std::string_view role, size_t k, size_t size, const void* data, const tensor::Spec& spec) {
    if (static_cast<int64_t>(size) != spec.byteSize()) {
      return makeError(ErrorKind::kInvalidBuffer, strCat("launch: ", role, " ", k, " (", tensor::specText(spec),
                                                         ") needs ", spec.byteSize(), " bytes, got ", size));
    }
    if (reinterpret_cast<uintptr_t>(data) % tensor::dtypeSize(spec.dtype) != 0) {
      return makeError(ErrorKind::kInvalidBuffer,
                       strCat("launch: ", role, " ", k, " is not aligned to ", tensor::dtypeSize(spec.dtype), " bytes"));
    }
    return absl::OkStatus();
  };
  for (size_t k = 0; k < inputs.size(); ++k) {
    ACCY_RETURN_IF_ERROR(check("input", k, inputs[k].size(), inputs[k].data(), input_specs_[k]));
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    ACCY_RETURN_IF_ERROR(check("output", k, outputs[k].size(), outputs[k].data(), output_specs_[k]));
    auto overlaps = [&](const std::byte* a, size_t n) {
      return n > 0 && outputs[k].size() > 0 && a < outputs[k].data() + outputs[k].size() && outputs[k].data() < a + n;
    };
    for (size_t j = 0; j < k; ++j) {
      if (overlaps(outputs[j].data(), outputs[j].size())) {
        return makeError(ErrorKind::kInvalidBuffer, strCat("launch: outputs ", j, " and ", k, " overlap"));
      }
    }
    for (size_t j = 0; j < inputs.size(); ++j) {
      if (overlaps(inputs[j].data(), inputs[j].size())) {
        return makeError(ErrorKind::kInvalidBuffer, strCat("launch: output ", k, " overlaps input ", j));
      }
    }
  }
  PlanRunner runner(slots_, inputs_, outputs_);
  return runner.run(inputs, outputs, [&](std::vector<std::span<std::byte>>& views) { return run(views); });
}

const LoadedProgram* StagedProgram::directProgram() const {
  if (stages_.size() != 1 || stages_[0].kind != Stage::Kind::kProgram) return nullptr;
  const Stage& st = stages_[0];
  if (st.inputs != inputs_ || st.outputs != outputs_) return nullptr;
  // Every output its own slot, none of them an input: the step's buffers
  // are then exactly the program's.
  std::set<int32_t> seen(inputs_.begin(), inputs_.end());
  for (int32_t s : outputs_) {
    if (!seen.insert(s).second) return nullptr;
  }
  return st.program.get();
}

namespace {

// A scan's xs read a few consecutive steps at a time: each value's slice
// along the loop's axis, in place when that axis is its first, else
// gathered into a buffer of its own (made once, for `steps` steps).
class XsSlices {
 public:
  XsSlices(const std::vector<tensor::Spec>& slots, const StagedProgram::Stage& st, int64_t steps)
      : xs_axis_(st.xs_axis), length_(st.length), outer_(st.xs_axis.size(), 1), inner_(st.xs_axis.size(), 1),
        gathered_(st.xs_axis.size()) {
    const std::vector<size_t>& xs_axis = st.xs_axis;
    for (size_t j = 0; j < xs_axis.size(); ++j) {
      const tensor::Spec& spec = slots[st.inputs[st.carries + j]];
      for (size_t d = 0; d < spec.axes.size(); ++d) {
        if (d < xs_axis[j]) outer_[j] *= spec.axes[d].extent;
        if (d > xs_axis[j]) inner_[j] *= spec.axes[d].extent;
      }
      inner_[j] *= tensor::dtypeSize(spec.dtype);
      if (xs_axis[j] != 0) gathered_[j].resize(static_cast<size_t>(outer_[j] * steps * inner_[j]));
    }
  }
  // Value j's steps [first, first + count), `xs` its whole buffer.
  std::span<const std::byte> slice(size_t j, std::span<const std::byte> xs, int64_t first, int64_t count) {
    const size_t bytes = static_cast<size_t>(count * inner_[j]);
    if (xs_axis_[j] == 0) return xs.subspan(static_cast<size_t>(first * inner_[j]), bytes);
    for (int64_t o = 0; o < outer_[j]; ++o) {
      std::memcpy(gathered_[j].data() + o * bytes, xs.data() + (o * length_ + first) * inner_[j], bytes);
    }
    return std::span<const std::byte>(gathered_[j].data(), static_cast<size_t>(outer_[j]) * bytes);
  }

 private:
  const std::vector<size_t>& xs_axis_;
  int64_t length_;
  std::vector<int64_t> outer_, inner_;
  std::vector<std::vector<std::byte>> gathered_;
};

}  // namespace

absl::Status StagedProgram::runScanChunks(const Stage& st, std::vector<std::span<std::byte>>& v) const {
  const size_t nc = st.carries, nx = st.xs;
  const int64_t length = st.length, chunk = st.chunk;
  const int64_t chunks = (length + chunk - 1) / chunk;
  std::vector<std::span<const std::byte>> ins(st.inputs.size());
  std::vector<std::span<std::byte>> outs(st.outputs.size());
  for (size_t k = nc + nx; k < st.inputs.size(); ++k) ins[k] = v[st.inputs[k]];  // captures
  // The carries go between the result slots and a second buffer by turns,
  // the last chunk writing the result.
  std::vector<std::vector<std::byte>> spare(nc);
  for (size_t i = 0; i < nc; ++i) spare[i].resize(v[st.outputs[i]].size());
  XsSlices xs_slices(slots_, st, chunk);
  for (int64_t c = 0; c < chunks; ++c) {
    ACCY_RETURN_IF_ERROR(checkStop());
    const int64_t first = c * chunk, steps = std::min(chunk, length - first);
    const bool to_result = (chunks - 1 - c) % 2 == 0;
    for (size_t i = 0; i < nc; ++i) {
      const std::span<std::byte> result = v[st.outputs[i]];
      const std::span<std::byte> written = to_result ? result : std::span<std::byte>(spare[i]);
      ins[i] = c == 0 ? std::span<const std::byte>(v[st.inputs[i]])
                      : std::span<const std::byte>(to_result ? std::span<std::byte>(spare[i]) : result);
      outs[i] = written;
    }
    for (size_t j = 0; j < nx; ++j) ins[nc + j] = xs_slices.slice(j, v[st.inputs[nc + j]], first, steps);
    for (size_t y = nc; y < st.outputs.size(); ++y) {  // ys: the loop's axis first, a chunk's rows together
      const std::span<std::byte> ys = v[st.outputs[y]];
      const size_t row = ys.size() / static_cast<size_t>(length);
      outs[y] = std::span<std::byte>(ys.data() + first * row, static_cast<size_t>(steps) * row);
    }
    const LoadedProgram& program = steps == chunk ? *st.program : *st.tail;
    ACCY_RETURN_IF_ERROR(program.launchTrusted(ins, outs));
  }
  return absl::OkStatus();
}

absl::Status StagedProgram::run(std::vector<std::span<std::byte>>& v) const {
  auto views = [&](const std::vector<int32_t>& slots, size_t from, size_t to) {
    std::vector<std::span<std::byte>> out;
    for (size_t k = from; k < to; ++k) out.push_back(v[slots[k]]);
    return out;
  };
  for (const Stage& st : stages_) {
    if (st.kind == Stage::Kind::kProgram) {
      // Once per step in a body: no allocation for a stage of a few buffers.
      absl::InlinedVector<std::span<const std::byte>, 8> ins;
      absl::InlinedVector<std::span<std::byte>, 8> outs;
      for (int32_t s : st.inputs) ins.push_back(v[s]);
      for (int32_t s : st.outputs) outs.push_back(v[s]);
      ACCY_RETURN_IF_ERROR(st.program->launchTrusted(ins, outs));
      continue;
    }
    if (st.kind == Stage::Kind::kScanChunks) {
      ACCY_RETURN_IF_ERROR(runScanChunks(st, v));
      continue;
    }
    const size_t nc = st.carries;
    const size_t nx = st.kind == Stage::Kind::kScan ? st.xs : 0;
    std::vector<std::span<std::byte>> init = views(st.inputs, 0, nc);
    std::vector<std::span<std::byte>> captures = views(st.inputs, nc + nx, st.inputs.size());
    std::vector<std::span<std::byte>> result = views(st.outputs, 0, nc);
    // A second buffer per carry: the steps write the result slot and this
    // one by turns, each reading what the one before wrote.
    std::vector<std::vector<std::byte>> spare(nc);
    for (size_t i = 0; i < nc; ++i) spare[i].resize(result[i].size());
    const StagedProgram& body = *st.body;
    PlanRunner step(body.slots_, body.inputs_, body.outputs_);
    // A body that is one loop-free program reading the body's inputs and
    // writing its outputs, in order, runs as that program's launch on the
    // step's buffers, with no slots between.
    const LoadedProgram* direct = body.directProgram();
    std::unique_ptr<BoundLaunch> bound = direct != nullptr ? direct->bind() : nullptr;
    auto runBody = [&](const StagedProgram& plan, PlanRunner& runner, const std::vector<std::span<const std::byte>>& ins,
                       const std::vector<std::span<std::byte>>& outs) {
      if (&plan == &body && bound != nullptr) {
        // The captures, bound before the first step, stay where they are.
        for (size_t i = 0; i < ins.size() - captures.size(); ++i) bound->bindInput(i, ins[i]);
        for (size_t k = 0; k < outs.size(); ++k) bound->bindOutput(k, outs[k]);
        return bound->run();
      }
      return runner.run(ins, outs, [&](std::vector<std::span<std::byte>>& bv) { return plan.run(bv); });
    };
    if (st.kind == Stage::Kind::kScan) {
      const int64_t length = st.length;
      if (length == 0) {
        for (size_t i = 0; i < nc; ++i) std::memcpy(result[i].data(), init[i].data(), init[i].size());
        continue;
      }
      std::vector<std::span<std::byte>> xs = views(st.inputs, nc, nc + nx);
      std::vector<std::span<std::byte>> ys = views(st.outputs, nc, st.outputs.size());
      // A backend that runs the body's steps itself, without a host wait
      // between them (Vulkan: one command buffer), gets the whole loop.
      if (direct != nullptr &&
          std::all_of(st.xs_axis.begin(), st.xs_axis.end(), [](size_t at) { return at == 0; })) {
        std::vector<std::span<const std::byte>> whole_in;
        for (const auto& group : {init, xs, captures}) whole_in.insert(whole_in.end(), group.begin(), group.end());
        std::vector<std::span<std::byte>> whole_out = result;
        whole_out.insert(whole_out.end(), ys.begin(), ys.end());
        std::optional<absl::Status> done =
            direct->launchRepeated(LoadedProgram::Repeat{length, nc, nx}, whole_in, whole_out);
        if (done.has_value()) {
          ACCY_RETURN_IF_ERROR(*done);
          continue;
        }
      }
      XsSlices xs_slices(slots_, st, 1);
      std::vector<std::span<const std::byte>> ins(nc + nx + captures.size());
      std::vector<std::span<std::byte>> outs(nc + ys.size());
      for (size_t k = 0; k < captures.size(); ++k) ins[nc + nx + k] = captures[k];
      if (bound != nullptr) {
        for (size_t k = 0; k < captures.size(); ++k) bound->bindInput(nc + nx + k, captures[k]);
      }
      for (int64_t t = 0; t < length; ++t) {
        ACCY_RETURN_IF_ERROR(checkStop());
        // Step t writes the result slot when length-1-t is even: the last
        // step always does.
        const bool to_result = (length - 1 - t) % 2 == 0;
        for (size_t i = 0; i < nc; ++i) {
          const std::span<std::byte> written = to_result ? result[i] : std::span<std::byte>(spare[i]);
          ins[i] = t == 0 ? std::span<const std::byte>(init[i])
                          : std::span<const std::byte>(to_result ? std::span<std::byte>(spare[i]) : result[i]);
          outs[i] = written;
        }
        for (size_t j = 0; j < nx; ++j) ins[nc + j] = xs_slices.slice(j, xs[j], t, 1);
        for (size_t y = 0; y < ys.size(); ++y) {
          const size_t slice = ys[y].size() / static_cast<size_t>(length);
          outs[nc + y] = std::span<std::byte>(ys[y].data() + t * slice, slice);
        }
        ACCY_RETURN_IF_ERROR(runBody(body, step, ins, outs));
      }
      continue;
    }
    // while_loop: the carries move between the result slots and the spare
    // buffers; the condition's one bool is read each trip.
    const StagedProgram& cond = *st.condition;
    PlanRunner test(cond.slots_, cond.inputs_, cond.outputs_);
    std::vector<std::span<const std::byte>> ins(nc + captures.size());
    for (size_t k = 0; k < captures.size(); ++k) ins[nc + k] = captures[k];
    if (bound != nullptr) {
      for (size_t k = 0; k < captures.size(); ++k) bound->bindInput(nc + k, captures[k]);
    }
    for (size_t i = 0; i < nc; ++i) ins[i] = init[i];
    std::byte go{0};
    std::vector<std::span<std::byte>> cond_out = {std::span<std::byte>(&go, 1)};
    bool in_result = false;  // where the carries are now: init, then result or spare by turns
    int64_t trips = 0;
    while (true) {
      ACCY_RETURN_IF_ERROR(checkStop());
      ACCY_RETURN_IF_ERROR(runBody(cond, test, ins, cond_out));
      if (go == std::byte{0}) break;
      std::vector<std::span<std::byte>> outs(nc);
      const bool to_result = trips == 0 ? true : !in_result;
      for (size_t i = 0; i < nc; ++i) outs[i] = to_result ? result[i] : std::span<std::byte>(spare[i]);
      ACCY_RETURN_IF_ERROR(runBody(body, step, ins, outs));
      for (size_t i = 0; i < nc; ++i) ins[i] = outs[i];
      in_result = to_result;
      ++trips;
    }
    if (!in_result) {  // no trip, or the last one wrote the spares
      for (size_t i = 0; i < nc; ++i) std::memcpy(result[i].data(), ins[i].data(), result[i].size());
    }
  }
  return absl::OkStatus();
}

}  // namespace accy::backends
