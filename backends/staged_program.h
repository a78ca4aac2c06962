// Programs with loops (scan, while_loop) as a plan of loop-free programs.
//
// A program with loops is split, in node order, into stages: each stretch
// of nodes between loops becomes a loop-free Program compiled the ordinary
// way, and each loop a loop stage whose body (and condition) is itself a
// staged plan, compiled once whatever the trip count. Values crossing a
// stage boundary live in slots: host buffers of their spec. A scan's
// carries are double-buffered and swapped by reference each step, never
// copied; its xs are read in place one slice per step (a slice along an
// axis that is not the first is gathered into a buffer of its own first),
// and its ys written in place. A while_loop reads its condition's one bool
// each trip.
//
// The loader turns each loop-free program into a LoadedProgram of some
// backend, so every backend that runs programs from host buffers runs
// loops this way (x86-64 today; docs/SEMANTICS.md, "Loops").
#ifndef ACCY_BACKENDS_STAGED_PROGRAM_H_
#define ACCY_BACKENDS_STAGED_PROGRAM_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backends/backend.h"
#include "compiler/tensor/program.h"

namespace accy::backends {

// True when `program` has a scan or while_loop node.
bool hasLoops(const tensor::Program& program);

using StageLoader =
    std::function<absl::StatusOr<std::shared_ptr<const LoadedProgram>>(const tensor::Program& stage)>;

struct StageOptions {
  // Offer each scan whose body is loop-free to `load` as a program of its
  // own, one scan node (choir::isScanProgram): a loader that runs it as one
  // kernel with the step loop inside (the CPU targets,
  // compiler/choir/passes/scan_kernel.h) returns it, and the plan runs it
  // as an ordinary stage; a loader that answers Unimplemented leaves the
  // scan to run step by step. A body of more than 256 nodes always runs
  // step by step (its one kernel would take the emitter seconds to compile
  // with no stop check inside).
  bool scans_in_kernel = false;
  // With scans_in_kernel: when > 0, no kernel runs more than about this
  // much of a scan's work (estimated: elements each body node makes or
  // reads, the op table's expensive ops counted 16 times) without the plan
  // asking its stop check. A scan whose whole loop is more runs as chunks of
  // consecutive steps, each chunk one launch of the scan's kernel over that
  // many steps, the stop check asked between chunks; one whose single step
  // is more runs step by step (its body's kernels ask the check between
  // their pieces). accyd sets it, so a call's deadline stops a scan of any
  // length within milliseconds; 0 runs every scan the loader takes as one
  // kernel.
  int64_t scan_kernel_work = 0;
};

// The work one step of a loop body does, as StageOptions::scan_kernel_work
// counts it.
int64_t stepWork(const tensor::Program& body);

class StagedProgram final : public LoadedProgram {
 public:
  // Splits `program` into stages and loads each loop-free one with `load`
  // (its errors are returned as they are).
  static absl::StatusOr<std::shared_ptr<const StagedProgram>> build(const tensor::Program& program,
                                                                    const StageLoader& load,
                                                                    const StageOptions& options = {});

  // Runs the plan on the caller's buffers: the program's input and output
  // counts and byte sizes, element-aligned, outputs disjoint (InvalidBuffer
  // before anything runs otherwise).
  // Between steps and trips it asks the thread's stop check (base/stop.h:
  // accyd installs one for a call's deadline and cancellation), so a loop
  // that never ends stops with the check's status.
  absl::Status launch(absl::Span<const std::span<const std::byte>> inputs,
                      absl::Span<const std::span<std::byte>> outputs) const override;
  // Only the target, the inputs, the outputs and, as scratch_bytes, the
  // memory a launch takes besides the caller's buffers (every slot, every
  // stage's scratch, the loops' second buffers; bodies' included).
  const executable::Executable& executable() const override { return info_; }

  // Loop-free programs loaded, bodies' included (a measure of code size:
  // it does not depend on any loop's length).
  int64_t loadedStages() const;
  // Loops the plan runs step by step (a scan in one kernel is an ordinary
  // stage: StageOptions::scans_in_kernel), bodies' included.
  int64_t steppedLoops() const;
  // Scans the plan runs as chunks of steps (StageOptions::scan_kernel_work),
  // bodies' included.
  int64_t chunkedScans() const;
  // Bytes of code (artifacts) of every loaded stage, bodies' included.
  int64_t codeBytes() const;
  const std::vector<tensor::Spec>& inputSpecs() const { return input_specs_; }
  // The plan as JSON (docs/WEB.md, "Programs with loops"): its slots'
  // specs, the slots of its inputs and outputs, and its stages in order,
  // each loop-free one's program written by `artifact` (a JSON value), each
  // loop's body (and condition) a plan of the same form.
  absl::StatusOr<std::string> planJson(
      const std::function<absl::StatusOr<std::string>(const LoadedProgram&)>& artifact) const;
  const std::vector<tensor::Spec>& outputSpecs() const { return output_specs_; }

  struct Stage;
  StagedProgram();
  // Out of line, where Stage is complete: a translation unit that only
  // includes this header must not instantiate std::vector<Stage>'s
  // destructor (clang refuses that for an incomplete type).
  ~StagedProgram() override;

 private:
  // Runs every stage on `slots` (views of the slot buffers).
  absl::Status run(std::vector<std::span<std::byte>>& slots) const;
  // Runs a scan stage of kind kScanChunks.
  absl::Status runScanChunks(const Stage& stage, std::vector<std::span<std::byte>>& slots) const;
  // The one loop-free program this plan is, when it reads the plan's
  // inputs and writes its outputs in order (each output a slot of its own,
  // none an input); else null.
  const LoadedProgram* directProgram() const;

  static absl::StatusOr<bool> loadScanKernel(const tensor::Program& p, int32_t id, std::vector<int32_t>& slot_of,
                                             const StageLoader& load, StagedProgram& plan,
                                             std::vector<int32_t>& results, int64_t max_work);

  std::vector<tensor::Spec> slots_;
  std::vector<int32_t> inputs_, outputs_;  // slots of the program's inputs and outputs
  std::vector<Stage> stages_;
  std::vector<tensor::Spec> input_specs_, output_specs_;
  executable::Executable info_;
  int64_t memoryBytes() const;
};

}  // namespace accy::backends

#endif  // ACCY_BACKENDS_STAGED_PROGRAM_H_
