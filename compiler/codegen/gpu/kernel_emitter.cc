#include "compiler/codegen/gpu/kernel_emitter.h"

#include <algorithm>
#include <set>

#include "base/errors.h"
#include "base/status_macros.h"
#include "base/strings.h"
#include "compiler/choir/passes/gpu_map.h"
#include "compiler/choir/rewrite.h"
#include "compiler/tensor/scalar_ops.h"

namespace accy::gpu {
namespace {

using choir::Affine;
using choir::Expr;
using choir::ExprKind;
using choir::ExprRef;
using choir::GpuForm;
using choir::LoopHeader;
using choir::Stmt;
using choir::StmtKind;

// Counts above this need 64-bit indices: a grid-stride step added to an
// index below it never wraps 32 bits.
constexpr int64_t kNarrowLimit = (int64_t{1} << 31) - 4096;

// A variable id no loop uses, for indices computed here (partials).
constexpr int kPartVar = -2;

int64_t product(const std::vector<LoopHeader>& loops) {
  int64_t n = 1;
  for (const LoopHeader& h : loops) n *= h.extent;
  return n;
}

}  // namespace

std::pair<Value, Value> Target::twoSum(DType d, Value a, Value b) {
  codegen::OpSemantics<Target> sem(*this, desc().name + " emitter");
  return sem.twoSum(d, a, b);
}

absl::Status KernelEmitter::unimplemented(std::string_view what) const {
  return makeError(ErrorKind::kUnimplemented, strCat(t_.desc().name, " emitter: ", what));
}

absl::Status KernelEmitter::checkDType(DType d, std::string_view where) const {
  const TargetDesc& desc = t_.desc();
  if (d == DType::f64 && !desc.float64) {
    return unimplemented(strCat("f64 values need ", desc.float64_needs, " (", where, ")"));
  }
  if (d == DType::i64 && !desc.int64) return unimplemented(strCat("i64 values need ", desc.int64_needs, " (", where, ")"));
  return absl::OkStatus();
}

absl::StatusOr<EmittedKernel> KernelEmitter::run(ProductEngine* engine, bool force_wide) {
  const TargetDesc& desc = t_.desc();
  if (std::find(desc.modes.begin(), desc.modes.end(), desc.mode) == desc.modes.end()) {
    return makeError(ErrorKind::kInvalidArgument, strCat(desc.name, " emitter: arithmetic mode ",
                                                         codegen::arithmeticModeName(desc.mode),
                                                         " is not one this target compiles"));
  }
  // Every binding is declared by every kernel: a buffer the target cannot
  // hold refuses them all.
  for (size_t i = 0; i < m_.buffers.size(); ++i) {
    const DType d = m_.buffers[i].dtype;
    if (d == DType::bool_ && !desc.bool_buffers) {
      return unimplemented(
          strCat("bool buffers (one byte per element, buffer ", i, ") need ", desc.bool_buffers_needs));
    }
    ACCY_RETURN_IF_ERROR(checkDType(d, strCat("buffer ", i, " of kernel ", k_.name)));
  }
  ACCY_ASSIGN_OR_RETURN(nest_, choir::describeGpuKernel(k_));
  wg_ = k_.workgroup_size;
  if (wg_ < 1) return unimplemented(strCat("kernel ", k_.name, " is not mapped to a GPU"));
  if (wg_ > desc.max_workgroup_size) {
    return makeError(ErrorKind::kInvalidArgument,
                     strCat(desc.name, " emitter: kernel ", k_.name, " needs ", wg_,
                            " invocations per workgroup, the device allows ", desc.max_workgroup_size));
  }
  const Stmt& leaf = *nest_.leaf;
  const int64_t outputs = product(nest_.loops), domain = product(leaf.domain) * product(nest_.serial);
  int64_t largest = std::max({outputs, domain, outputs * std::max<int64_t>(nest_.split, 1)});
  for (const choir::Buffer& b : m_.buffers) largest = std::max(largest, b.elements());
  KernelPlan plan;
  plan.form = nest_.form;
  plan.workgroup_size = wg_;
  plan.wide = (force_wide && desc.index64) || largest >= kNarrowLimit;
  if (plan.wide && !desc.index64) {
    return unimplemented(strCat("kernel ", k_.name, " counts ", largest,
                                " elements or iterations; this target's indices are 32-bit (fewer than 2^31 - 4096)"));
  }
  std::set<int> used = {leaf.buffer};
  if (nest_.partials >= 0) used.insert(nest_.partials);
  auto loads = [&](const Expr& x) {
    if (x.kind == ExprKind::kLoad) used.insert(x.buffer);
  };
  choir::visitExpr(leaf.value, loads);
  for (const ExprRef& a : leaf.args) choir::visitExpr(a, loads);
  if (leaf.guard) choir::visitExpr(leaf.guard, loads);
  plan.used_buffers.assign(used.begin(), used.end());
  wide_ = plan.wide;
  ACCY_RETURN_IF_ERROR(t_.begin(plan));
  engine_ = engine;

  switch (nest_.form) {
    case GpuForm::kElementwise:
    case GpuForm::kSerialReduce:
    case GpuForm::kOrderedStores:
      ACCY_RETURN_IF_ERROR(perOutput(outputs));
      break;
    case GpuForm::kTreeReduce:
      ACCY_RETURN_IF_ERROR(treeReduce(outputs, domain));
      break;
    case GpuForm::kTiledProduct:
      ACCY_RETURN_IF_ERROR(tiledProduct());
      break;
  }
  ACCY_RETURN_IF_ERROR(error_);
  ACCY_RETURN_IF_ERROR(sem_.status());
  ACCY_RETURN_IF_ERROR(t_.status());
  EmittedKernel out;
  out.nest = nest_;
  out.workgroups = launched_;
  out.work = outputs * domain;
  out.wide = plan.wide;
  return out;
}

// --- control flow -----------------------------------------------------------

void KernelEmitter::forgetSince(size_t mark) {
  while (cse_log_.size() > mark) {
    cse_.erase(cse_log_.back());
    cse_log_.pop_back();
  }
}

absl::Status KernelEmitter::strided(Value start, Value limit, Value step, const Target::IndexBody& body,
                                    int64_t max_trips) {
  return t_.strided(
      start, limit, step,
      [&](Value x) {
        // Values made in the loop are not defined after it.
        const size_t mark = cse_log_.size();
        absl::Status s = body(x);
        forgetSince(mark);
        return s;
      },
      max_trips);
}

absl::Status KernelEmitter::when(Value cond, const Target::Body& body) {
  return t_.when(cond, [&]() {
    const size_t mark = cse_log_.size();
    absl::Status s = body();
    forgetSince(mark);
    return s;
  });
}

absl::Status KernelEmitter::domainLoops(const Stmt& s, const Target::IndexBody& body) {
  return loopsOver(s.domain, body);
}

absl::Status KernelEmitter::loopsOver(const std::vector<LoopHeader>& loops, const Target::IndexBody& body) {
  const int64_t n = product(loops);
  if (!t_.desc().nested_domain_loops) {
    return strided(t_.index(0), t_.index(n), t_.index(1), [&](Value r) {
      decompose(r, loops);
      return body(r);
    }, n);
  }
  std::function<absl::Status(size_t)> loop = [&](size_t i) -> absl::Status {
    if (i == loops.size()) return body(0);
    const LoopHeader& h = loops[i];
    return strided(t_.index(0), t_.index(h.extent), t_.index(1), [&](Value x) {
      vars_[h.var] = x;
      return loop(i + 1);
    }, h.extent);
  };
  return loop(0);
}

void KernelEmitter::addCompensated(DType d, Value into, Value error, Value x) {
  const auto [sum, e] = t_.twoSum(d, t_.read(d, into), x);
  t_.write(d, error, binary(OpCode::kAdd, d, t_.read(d, error), e));
  t_.write(d, into, sum);
}

absl::Status KernelEmitter::addValue(const Stmt& s, Value into) {
  const DType d = m_.buffers[s.buffer].dtype;
  ACCY_ASSIGN_OR_RETURN(Value x, expr(s.value));
  t_.write(d, into, binary(s.combiner, d, t_.read(d, into), x));
  return absl::OkStatus();
}

// --- indices and accesses -----------------------------------------------------

Value KernelEmitter::affine(const Affine& a) {
  Value acc = 0;
  for (const Affine::Term& term : a.terms) {
    const Value v = vars_.at(term.var);
    if (acc == 0) {
      acc = term.coeff == 1 ? v : t_.indexMul(v, term.coeff);
    } else {
      acc = term.coeff == 1 ? t_.indexAdd(acc, v) : t_.indexMulAdd(v, term.coeff, acc);
    }
  }
  if (acc == 0) return t_.index(a.constant);
  return a.constant == 0 ? acc : t_.indexAdd(acc, t_.index(a.constant));
}

void KernelEmitter::decompose(Value flat, const std::vector<LoopHeader>& loops) {
  int64_t stride = 1;
  for (size_t i = loops.size(); i-- > 0;) {
    Value v = stride == 1 ? flat : t_.indexDiv(flat, stride);
    if (i > 0) v = t_.indexRem(v, loops[i].extent);
    vars_[loops[i].var] = v;
    stride *= loops[i].extent;
  }
}

Value KernelEmitter::load(int buffer, const std::vector<Affine>& index) {
  return t_.load(buffer, affine(choir::flatIndex(m_.buffers[buffer], index)));
}

void KernelEmitter::store(int buffer, const std::vector<Affine>& index, Value v) {
  t_.store(buffer, affine(choir::flatIndex(m_.buffers[buffer], index)), v);
}

absl::Status KernelEmitter::bindPositions(const std::vector<int>& vars, const std::vector<ExprRef>& values) {
  for (size_t j = 0; j < vars.size(); ++j) {
    ACCY_ASSIGN_OR_RETURN(const Value b, expr(values[j]));
    const DType as = wide_ ? DType::i64 : DType::i32;
    vars_[vars[j]] = t_.intAsIndex(convert(b, values[j]->dtype, as));
  }
  return absl::OkStatus();
}

absl::Status KernelEmitter::storeLeaf(const Stmt& s) {
  ACCY_RETURN_IF_ERROR(bindPositions(s.bound, s.args));
  auto put = [&]() -> absl::Status {
    ACCY_ASSIGN_OR_RETURN(Value v, expr(s.value));
    store(s.buffer, s.index, v);
    return absl::OkStatus();
  };
  absl::Status st = absl::OkStatus();
  if (s.guard) {
    absl::StatusOr<Value> keep = expr(s.guard);
    st = keep.ok() ? when(*keep, put) : keep.status();
  } else {
    st = put();
  }
  for (int var : s.bound) vars_.erase(var);
  return st;
}

absl::Status KernelEmitter::storeResult(const Stmt& s, Value acc) {
  const DType d = m_.buffers[s.buffer].dtype;
  if (s.mean_count != 0) acc = binary(OpCode::kDiv, d, acc, t_.constant(d, static_cast<double>(s.mean_count)));
  store(s.buffer, s.index, acc);
  return absl::OkStatus();
}

// --- schedules ------------------------------------------------------------------

// Elementwise and serial reductions: a grid-stride loop, one output per
// invocation and step.
absl::Status KernelEmitter::perOutput(int64_t outputs) {
  launched_ = std::clamp<int64_t>((outputs + wg_ - 1) / wg_, 1, t_.desc().max_workgroups);
  const Stmt& leaf = *nest_.leaf;
  auto body = [&](Value x) -> absl::Status {
    decompose(x, nest_.loops);
    if (leaf.kind != StmtKind::kStore) return reduceSerial(leaf);
    if (nest_.serial.empty()) return storeLeaf(leaf);
    // kOrderedStores: this invocation's stores, in the serial loops' order.
    return loopsOver(nest_.serial, [&](Value) { return storeLeaf(leaf); });
  };
  // Enough invocations for every output: one guarded step, no loop.
  if (launched_ * wg_ >= outputs) {
    const Value x = t_.globalId();
    return when(t_.indexLess(x, t_.index(outputs)), [&]() { return body(x); });
  }
  return strided(t_.globalId(), t_.index(outputs), t_.invocationCount(launched_), body);
}

// One invocation walks the whole domain. A floating sum is compensated
// (Target::twoSum: a + x is exactly sum + e; the e are summed apart and
// added at the end), so its error does not grow with the domain: within
// about one rounding of the exact sum of the terms.
absl::Status KernelEmitter::reduceSerial(const Stmt& s) {
  const DType d = m_.buffers[s.buffer].dtype;
  const Value acc = t_.variable(d, identity(s.combiner, d));
  if (!choir::cascades(s.combiner, d)) {
    ACCY_RETURN_IF_ERROR(domainLoops(s, [&](Value) { return addValue(s, acc); }));
    return storeResult(s, t_.read(d, acc));
  }
  const Value error = t_.variable(d, t_.constant(d, 0));
  ACCY_RETURN_IF_ERROR(domainLoops(s, [&](Value) -> absl::Status {
    ACCY_ASSIGN_OR_RETURN(Value x, expr(s.value));
    addCompensated(d, acc, error, x);
    return absl::OkStatus();
  }));
  return storeResult(s, binary(OpCode::kAdd, d, t_.read(d, acc), t_.read(d, error)));
}

// One workgroup per output (grid-stride over outputs), or nest_.split
// workgroups per output: part p of output o is block o * P + p, starting at
// p * workgroup size + local id and striding by P * workgroup size, its
// uncombined result going to partials[o * P + p] for the combining kernel.
absl::Status KernelEmitter::treeReduce(int64_t outputs, int64_t domain) {
  const Stmt& s = *nest_.leaf;
  const DType d = m_.buffers[s.buffer].dtype;
  const int64_t split = nest_.split;
  const int64_t blocks = outputs * std::max<int64_t>(split, 1);
  launched_ = std::clamp<int64_t>(blocks, 1, t_.desc().max_workgroups);
  const Value lid = t_.localId();
  return strided(t_.groupId(), t_.index(blocks), t_.groupCount(launched_), [&](Value block) -> absl::Status {
    Value start = lid;
    int64_t stride = wg_;
    if (split > 0) {
      decompose(t_.indexDiv(block, split), nest_.loops);
      start = t_.indexMulAdd(t_.indexRem(block, split), wg_, lid);
      stride = split * wg_;
    } else {
      decompose(block, nest_.loops);
    }
    // A floating sum's parts compensated (choir::compensatesParts), each
    // invocation's error carried through the workgroup's combine (an
    // invocation's part may be large and cancel another's: strided parts of
    // alternating signs).
    const bool compensated = choir::compensatesParts(s, d);
    const Value acc = t_.variable(d, identity(s.combiner, d));
    const Value error = compensated ? t_.variable(d, t_.constant(d, 0)) : 0;
    const std::map<int, Value> outer = vars_;
    ACCY_RETURN_IF_ERROR(strided(
        start, t_.index(domain), t_.index(stride),
        [&](Value r) -> absl::Status {
          vars_ = outer;
          decompose(r, s.domain);
          if (!compensated) return addValue(s, acc);
          ACCY_ASSIGN_OR_RETURN(Value x, expr(s.value));
          addCompensated(d, acc, error, x);
          return absl::OkStatus();
        },
        (domain + stride - 1) / stride));
    vars_ = outer;
    return combineWorkgroup(s, acc, error, [&](Value combined, Value rest) -> absl::Status {
      if (split > 0 && compensated) {
        // The part and what its rounding left, for block o * split + p
        // (choir::splitSlotsPerOutput): at o * slots + p and split after.
        const Value at = t_.indexMulAdd(t_.indexDiv(block, split), choir::splitSlotsPerOutput(split, true),
                                        t_.indexRem(block, split));
        vars_[kPartVar] = at;
        store(nest_.partials, {Affine::var(kPartVar)}, combined);
        vars_[kPartVar] = t_.indexAdd(at, t_.index(split));
        store(nest_.partials, {Affine::var(kPartVar)}, rest);
        return absl::OkStatus();
      }
      if (split > 0) {
        vars_[kPartVar] = block;
        store(nest_.partials, {Affine::var(kPartVar)}, combined);
        return absl::OkStatus();
      }
      return storeResult(s, combined);
    });
  });
}

// Combines the workgroup's values of `acc` (a variable); invocation 0
// passes the result to `finish`.
absl::Status KernelEmitter::combineWorkgroup(const Stmt& s, Value acc, Value error, const Finish& finish) {
  const DType d = m_.buffers[s.buffer].dtype;
  const OpCode c = s.combiner;
  const Value lid = t_.localId();
  const TargetDesc& desc = t_.desc();
  // `error` given (a floating sum): every value travels with its error,
  // and every addition is a two-sum. Otherwise the additions are plain.
  const bool carried = error != 0;
  const Value zero = carried ? t_.constant(d, 0) : 0;
  auto plain = [&](Value other) { t_.write(d, acc, binary(c, d, t_.read(d, acc), other)); };
  // acc (+)= other, in the tree (pairwise) and in the serial pass.
  auto foldTree = [&](Value other, Value other_error) {
    if (!carried) return plain(other);
    addCompensated(d, acc, error, other);
    t_.write(d, error, binary(OpCode::kAdd, d, t_.read(d, error), other_error));
  };
  // finish(total, what its rounding left: 0 unless `error` is given).
  auto done = [&]() -> absl::Status {
    if (carried) {
      const auto [hi, lo] = t_.twoSum(d, t_.read(d, acc), t_.read(d, error));
      return finish(hi, lo);
    }
    return finish(t_.read(d, acc), 0);
  };
  auto first = [&]() { return t_.indexEq(lid, t_.index(0)); };
  // Lane 0 of each subgroup gathers its subgroup's values: shuffle-downs at
  // offsets 1, 2, 4, ... below the subgroup size read at run time.
  auto foldSubgroup = [&](Value size) {
    return t_.doubling(
        t_.index(1), size,
        [&](Value off) {
          const Value mine = t_.read(d, acc);
          const Value other_error = carried ? t_.shuffleDown(d, t_.read(d, error), off, 0) : 0;
          foldTree(t_.shuffleDown(d, mine, off, 0), other_error);
          return absl::OkStatus();
        },
        /*max_trips=*/8);  // offsets 1 to 64 within a subgroup of at most 128
  };
  const SharedArray no_slots{};
  if (desc.subgroups == Subgroups::kRuntime) {
    const SharedArray slots = t_.sharedArray(d, wg_);
    const SharedArray error_slots = carried ? t_.sharedArray(d, wg_) : no_slots;
    const Value size = t_.subgroupBuiltin(0), count = t_.subgroupBuiltin(1), id = t_.subgroupBuiltin(2),
                lane = t_.subgroupBuiltin(3);
    ACCY_RETURN_IF_ERROR(foldSubgroup(size));
    ACCY_RETURN_IF_ERROR(when(t_.indexEq(lane, t_.index(0)), [&]() {
      t_.sharedStore(slots, id, 0, t_.read(d, acc));
      if (carried) t_.sharedStore(error_slots, id, 0, t_.read(d, error));
      return absl::OkStatus();
    }));
    t_.barrier();
    ACCY_RETURN_IF_ERROR(when(first(), [&]() -> absl::Status {
      t_.write(d, acc, t_.sharedLoad(slots, t_.index(0), 0));
      if (carried) t_.write(d, error, t_.sharedLoad(error_slots, t_.index(0), 0));
      ACCY_RETURN_IF_ERROR(strided(
          t_.index(1), count, t_.index(1),
          [&](Value i) {
            foldTree(t_.sharedLoad(slots, i, 0), carried ? t_.sharedLoad(error_slots, i, 0) : 0);
            return absl::OkStatus();
          },
          /*max_trips=*/wg_));  // one slot per subgroup
      return done();
    }));
    t_.barrier();  // the slots are reused by the next output
    return absl::OkStatus();
  }
  if (desc.subgroups == Subgroups::kRuntimeLanes) {
    const SharedArray slots = t_.sharedArray(d, wg_);
    const SharedArray error_slots = carried ? t_.sharedArray(d, wg_) : no_slots;
    const Value size = t_.subgroupBuiltin(0), lane = t_.subgroupBuiltin(3);
    ACCY_RETURN_IF_ERROR(foldSubgroup(size));
    const Value lead = t_.indexEq(lane, t_.index(0));
    t_.sharedStore(slots, lid, 0, t_.select(d, lead, t_.read(d, acc), identity(c, d)));
    if (carried) t_.sharedStore(error_slots, lid, 0, t_.select(d, lead, t_.read(d, error), zero));
    t_.barrier();
    ACCY_RETURN_IF_ERROR(when(first(), [&]() -> absl::Status {
      t_.write(d, acc, t_.sharedLoad(slots, t_.index(0), 0));
      if (carried) t_.write(d, error, t_.sharedLoad(error_slots, t_.index(0), 0));
      ACCY_RETURN_IF_ERROR(strided(t_.index(1), t_.index(wg_), t_.index(1), [&](Value i) {
        foldTree(t_.sharedLoad(slots, i, 0), carried ? t_.sharedLoad(error_slots, i, 0) : 0);
        return absl::OkStatus();
      }));
      return done();
    }));
    t_.barrier();  // the slots are reused by the next output
    return absl::OkStatus();
  }
  // A tree in workgroup memory down to `down_to` values.
  const int64_t width = desc.subgroups == Subgroups::kFixed ? desc.subgroup_size : 1;
  const bool slots_used = wg_ > width;
  if (slots_used) {
    const SharedArray slots = t_.sharedArray(d, wg_);
    const SharedArray error_slots = carried ? t_.sharedArray(d, wg_) : no_slots;
    auto put = [&]() {
      t_.sharedStore(slots, lid, 0, t_.read(d, acc));
      if (carried) t_.sharedStore(error_slots, lid, 0, t_.read(d, error));
    };
    put();
    t_.barrier();
    for (int64_t half = wg_ / 2; half >= width; half /= 2) {
      ACCY_RETURN_IF_ERROR(when(t_.indexLess(lid, t_.index(half)), [&]() {
        foldTree(t_.sharedLoad(slots, lid, half), carried ? t_.sharedLoad(error_slots, lid, half) : 0);
        put();
        return absl::OkStatus();
      }));
      t_.barrier();
    }
  }
  if (desc.subgroups == Subgroups::kFixed) {
    // The first subgroup: shuffles over min(width, workgroup) lanes.
    const int64_t lanes = std::min<int64_t>(wg_, width);
    ACCY_RETURN_IF_ERROR(when(t_.indexLess(lid, t_.index(width)), [&]() -> absl::Status {
      for (int64_t off = lanes / 2; off >= 1; off /= 2) {
        const Value other_error = carried ? t_.shuffleDown(d, t_.read(d, error), t_.index(off), lanes) : 0;
        foldTree(t_.shuffleDown(d, t_.read(d, acc), t_.index(off), lanes), other_error);
      }
      return when(first(), [&]() { return done(); });
    }));
  } else {
    ACCY_RETURN_IF_ERROR(when(first(), [&]() { return done(); }));
  }
  if (slots_used) t_.barrier();  // the slots are reused by the next output
  return absl::OkStatus();
}

// kTiledProduct (passes/gpu_map.h): a workgroup of T x T invocations
// computes a TR x TR block of outputs, R = nest_.micro (grid-stride over
// blocks and batch points). Invocation (ty, tx) = (local id / T, local id %
// T) owns rows row0 + ty + i T and columns col0 + tx + j T for i, j < R (a
// strided micro-tile: coalesced stores, conflict-free workgroup-memory
// reads), in R * R accumulators. For each T-long slice of the domain it
// stages lhs rows ty + i T at point kt + tx and rhs point kt + ty at columns
// tx + j T (0 where out of range), barrier, and accumulates each of its
// outputs over the slice in domain order, over exactly min(T, K - kt)
// points. The stores are guarded per output.
absl::Status KernelEmitter::tiledProduct() {
  const Stmt& s = *nest_.leaf;
  const DType d = m_.buffers[s.buffer].dtype;
  const TargetDesc& desc = t_.desc();
  const int64_t T = nest_.tile, M = nest_.micro, TM = T * M;
  const LoopHeader& row_loop = nest_.loops[nest_.row];
  const LoopHeader& col_loop = nest_.loops[nest_.col];
  const LoopHeader& dom = s.domain[0];
  const int64_t rows = row_loop.extent, cols = col_loop.extent, K = dom.extent;
  if (M < 1) return unimplemented(strCat("kernel ", k_.name, " is register-blocked ", M, "x", M));
  const int64_t blocks_r = (rows + TM - 1) / TM, blocks_c = (cols + TM - 1) / TM;
  std::vector<LoopHeader> batch;
  for (int i : nest_.batch) batch.push_back(nest_.loops[i]);
  const int64_t tiles = blocks_r * blocks_c * product(batch);
  launched_ = std::clamp<int64_t>(tiles, 1, desc.max_workgroups);
  const int64_t tile_bytes = TM * T * tensor::dtypeSize(d);
  if (desc.workgroup_memory_bytes > 0 && 2 * tile_bytes > desc.workgroup_memory_bytes) {
    return unimplemented(strCat("kernel ", k_.name, ": a ", T, "x", T, " tile blocked ", M, "x", M, " needs ",
                                2 * tile_bytes, " bytes of workgroup memory (", desc.workgroup_memory_bytes,
                                " allowed)"));
  }
  const SharedArray lhs = t_.sharedArray(d, TM * T), rhs = t_.sharedArray(d, TM * T);
  const Value lid = t_.localId();
  const Value tx = t_.indexRem(lid, T), ty = t_.indexDiv(lid, T);
  // Where this invocation stages: lhs[(ty + i T) T + tx] = lhs[lid + i T T]
  // and rhs[ty TR + tx + j T]; where it reads: lhs[(ty + i T) T + kk] and
  // rhs[kk TR + tx + j T].
  const Value rhs_slot = t_.indexMulAdd(ty, TM, tx);
  const Value lhs_row = t_.indexMul(ty, T);
  if (engine_ != nullptr) ACCY_RETURN_IF_ERROR(engine_->setup({lhs, rhs, tx, ty, T}));

  return strided(t_.groupId(), t_.index(tiles), t_.groupCount(launched_), [&](Value tile) -> absl::Status {
    // tile = ((batch...) * blocks_r + br) * blocks_c + bc
    const Value bc = t_.indexRem(tile, blocks_c), rest = t_.indexDiv(tile, blocks_c);
    const Value br = t_.indexRem(rest, blocks_r);
    if (!batch.empty()) decompose(t_.indexDiv(rest, blocks_r), batch);
    const Value r0 = t_.indexMul(br, TM), c0 = t_.indexMul(bc, TM);
    std::vector<Value> row(M), col(M), row_ok(M), col_ok(M);
    for (int64_t i = 0; i < M; ++i) {
      row[i] = i == 0 ? t_.indexAdd(r0, ty) : t_.indexAdd(row[0], t_.index(i * T));
      col[i] = i == 0 ? t_.indexAdd(c0, tx) : t_.indexAdd(col[0], t_.index(i * T));
      row_ok[i] = t_.indexLess(row[i], t_.index(rows));
      col_ok[i] = t_.indexLess(col[i], t_.index(cols));
    }
    const std::map<int, Value> outer = vars_;
    std::vector<Value> acc;  // acc[i * M + j]: output (row[i], col[j])
    if (engine_ != nullptr) {
      ACCY_RETURN_IF_ERROR(engine_->clear());
    } else {
      for (int64_t i = 0; i < M * M; ++i) acc.push_back(t_.variable(d, identity(OpCode::kAdd, d)));
    }

    // Stages slot = guard ? value : 0.
    auto stage = [&](const ExprRef& value, Value guard, const SharedArray& a, Value i, int64_t plus) -> absl::Status {
      const Value staged = t_.variable(d, t_.constant(d, 0));
      ACCY_RETURN_IF_ERROR(when(guard, [&]() -> absl::Status {
        ACCY_ASSIGN_OR_RETURN(Value v, expr(value));
        t_.write(d, staged, v);
        return absl::OkStatus();
      }));
      const Value v = t_.read(d, staged);
      if (engine_ != nullptr) {
        engine_->stage(a, i, plus, v);
      } else {
        t_.sharedStore(a, i, plus, v);
      }
      return absl::OkStatus();
    };
    auto accumulate = [&](int64_t i, int64_t j, Value x, Value y) {
      const Value cell = acc[static_cast<size_t>(i * M + j)];
      t_.write(d, cell, binary(OpCode::kAdd, d, t_.read(d, cell), binary(OpCode::kMul, d, x, y)));
    };

    // One slice starting at kt: `n` points when known here (unrolled),
    // else -1 (the loop is bounded by what is left of the domain).
    auto slice = [&](Value kt, int64_t n) -> absl::Status {
      const Value k_l = t_.indexAdd(kt, tx), k_r = t_.indexAdd(kt, ty);
      Value in_l = 0, in_r = 0;
      if (n < 0) {
        in_l = t_.indexLess(k_l, t_.index(K));
        in_r = t_.indexLess(k_r, t_.index(K));
      } else if (n < T) {
        in_l = t_.indexLess(tx, t_.index(n));
        in_r = t_.indexLess(ty, t_.index(n));
      }
      for (int64_t i = 0; i < M; ++i) {
        vars_ = outer;
        vars_[row_loop.var] = row[i];
        vars_[col_loop.var] = col[0];
        vars_[dom.var] = k_l;
        const Value guard = in_l == 0 ? row_ok[i] : t_.logicAnd(row_ok[i], in_l);
        ACCY_RETURN_IF_ERROR(stage(nest_.lhs, guard, lhs, lid, i * T * T));
      }
      for (int64_t j = 0; j < M; ++j) {
        vars_ = outer;
        vars_[row_loop.var] = row[0];
        vars_[col_loop.var] = col[j];
        vars_[dom.var] = k_r;
        const Value guard = in_r == 0 ? col_ok[j] : t_.logicAnd(col_ok[j], in_r);
        ACCY_RETURN_IF_ERROR(stage(nest_.rhs, guard, rhs, rhs_slot, j * T));
      }
      vars_ = outer;
      t_.barrier();
      if (engine_ != nullptr) {
        ACCY_RETURN_IF_ERROR(engine_->multiply(n));
      } else if (n >= 0) {
        for (int64_t kk = 0; kk < n; ++kk) {
          std::vector<Value> x(M), y(M);
          for (int64_t i = 0; i < M; ++i) x[i] = t_.sharedLoad(lhs, lhs_row, i * T * T + kk);
          for (int64_t j = 0; j < M; ++j) y[j] = t_.sharedLoad(rhs, tx, kk * TM + j * T);
          for (int64_t i = 0; i < M; ++i) {
            for (int64_t j = 0; j < M; ++j) accumulate(i, j, x[i], y[j]);
          }
        }
      } else {
        // Only the slice's real points: nothing padded enters the sum.
        const Value points = t_.indexMin(t_.indexSub(t_.index(K), kt), t_.index(T));
        ACCY_RETURN_IF_ERROR(strided(
            t_.index(0), points, t_.index(1),
            [&](Value kk) {
              std::vector<Value> x(M), y(M);
              const Value lhs_at = t_.indexAdd(lhs_row, kk), rhs_at = t_.indexMulAdd(kk, TM, tx);
              for (int64_t i = 0; i < M; ++i) x[i] = t_.sharedLoad(lhs, lhs_at, i * T * T);
              for (int64_t j = 0; j < M; ++j) y[j] = t_.sharedLoad(rhs, rhs_at, j * T);
              for (int64_t i = 0; i < M; ++i) {
                for (int64_t j = 0; j < M; ++j) accumulate(i, j, x[i], y[j]);
              }
              return absl::OkStatus();
            },
            /*max_trips=*/T));
      }
      t_.barrier();  // the tiles are refilled next slice
      return absl::OkStatus();
    };

    if (desc.unrolled_slices) {
      const int64_t full = K / T, tail = K % T;
      if (full > 0) {
        ACCY_RETURN_IF_ERROR(
            strided(t_.index(0), t_.index(full * T), t_.index(T), [&](Value kt) { return slice(kt, T); }));
      }
      if (tail > 0) ACCY_RETURN_IF_ERROR(slice(t_.index(full * T), tail));
    } else {
      ACCY_RETURN_IF_ERROR(strided(t_.index(0), t_.index(K), t_.index(T), [&](Value kt) { return slice(kt, -1); }));
    }
    vars_ = outer;

    auto storeAt = [&](Value r, Value c, Value ok, Value v) -> absl::Status {
      return when(ok, [&]() -> absl::Status {
        vars_ = outer;
        vars_[row_loop.var] = r;
        vars_[col_loop.var] = c;
        return storeResult(s, v);
      });
    };
    if (engine_ != nullptr) {
      ACCY_RETURN_IF_ERROR(engine_->store(r0, c0, [&](Value r, Value c, Value v) {
        const Value ok = t_.logicAnd(t_.indexLess(r, t_.index(rows)), t_.indexLess(c, t_.index(cols)));
        return storeAt(r, c, ok, v);
      }));
    } else {
      for (int64_t i = 0; i < M; ++i) {
        for (int64_t j = 0; j < M; ++j) {
          const Value ok = t_.logicAnd(row_ok[i], col_ok[j]);
          ACCY_RETURN_IF_ERROR(storeAt(row[i], col[j], ok, t_.read(d, acc[static_cast<size_t>(i * M + j)])));
        }
      }
    }
    vars_ = outer;
    return absl::OkStatus();
  });
}

// --- values -------------------------------------------------------------------

absl::StatusOr<Value> KernelEmitter::expr(const ExprRef& e) {
  choir::countWork();  // a caller's stop check is asked as emitting goes (choir/work.h)
  const int key = numbers_.number(e);
  if (auto it = cse_.find(key); it != cse_.end()) return it->second;
  if (absl::Status st = checkDType(e->dtype, ""); !st.ok()) {
    const std::string where = e->kind == ExprKind::kOp      ? strCat("op ", tensor::opName(e->op))
                              : e->kind == ExprKind::kLoad  ? strCat("a load of buffer ", e->buffer)
                              : e->kind == ExprKind::kIndex ? std::string("an index")
                                                            : std::string("a constant");
    return checkDType(e->dtype, strCat(where, " in kernel ", k_.name));
  }
  Value v = 0;
  switch (e->kind) {
    case ExprKind::kLoad: {
      // Variables the load binds (clamped indices read from data) join
      // the loop variables for its address, and only for it.
      ACCY_RETURN_IF_ERROR(bindPositions(e->bound, e->args));
      v = load(e->buffer, e->index);
      for (int var : e->bound) vars_.erase(var);
      break;
    }
    case ExprKind::kConstant:
      v = t_.constant(e->dtype, e->constant);
      break;
    case ExprKind::kIndex: {
      DType as = DType::i32;
      const Value i = t_.indexAsInt(affine(e->index[0]), &as);
      v = convert(i, as, e->dtype);
      break;
    }
    case ExprKind::kOp: {
      std::vector<Value> a;
      for (const ExprRef& x : e->args) {
        ACCY_ASSIGN_OR_RETURN(Value av, expr(x));
        a.push_back(av);
      }
      if (e->op == OpCode::kThreefryWord0 || e->op == OpCode::kThreefryWord1) {
        // One encryption gives both words: the other is kept for this scope.
        const auto [w0, w1] = sem_.threefryWords(a[0], a[1], a[2], a[3]);
        const bool second = e->op == OpCode::kThreefryWord1;
        const int other = numbers_.otherThreefryWord(e);
        cse_.emplace(other, second ? w0 : w1);
        cse_log_.push_back(other);
        v = second ? w1 : w0;
      } else {
        v = sem_.op(e->op, e->dtype, e->args.empty() ? e->dtype : e->args[0]->dtype, a);
      }
      ACCY_RETURN_IF_ERROR(sem_.status());
      break;
    }
  }
  ACCY_RETURN_IF_ERROR(error_);
  ACCY_RETURN_IF_ERROR(t_.status());
  cse_.emplace(key, v);
  cse_log_.push_back(key);
  return v;
}

}  // namespace accy::gpu
