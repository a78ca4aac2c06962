// Where compile time goes: every stage timed apart, for programs of growing
// size (docs/PERFORMANCE.md, "Compile time by stage").
//
//   bazel run -c opt //bench:compile_bench -- [--sizes=256,1024,4096,16384]
//       [--shapes=chain,reductions,fanout,mlp] [--budget-seconds=60]
//       [--fuse-max-nodes=256] [--choir]
//
// Shapes (N is the node count of the recorded program, within a few):
//   chain       v*1.0001, v+0.5, tanh(v) in turn over a 1024 x 8 input, then
//               a sum: N fused elementwise ops;
//   reductions  N/3 independent reductions of the input (x*c_i summed over
//               a), added together;
//   fanout      one value (tanh x) used by N/3 ops (v*c_i + c_i), summed;
//   mlp         a multi-layer perceptron (batch 16, width 32, tanh layers),
//               its loss and valueAndGrad for every weight, with as many
//               layers as give N nodes after the transform; batched by vmap
//               over 4 examples' worth of weights for the vmap stage.
// Stages: record (define), valueAndGrad and vmap (mlp only), wire encode,
// wire decode, lower, each Choir pass (fuse, loop order, tile, vectorize,
// parallelize), x86-64 emission, load. Best of 3 per stage; a size whose
// first full compile passes --budget-seconds is reported as over budget,
// and larger sizes of that shape are not tried. One thread.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "accy/accy.h"
#include "backends/cpu/cpu_program.h"
#include "bench/bench_util.h"
#include "tests/program_shapes.h"
#include "compiler/choir/lower.h"
#include "compiler/choir/passes/fuse.h"
#include "compiler/choir/passes/loop_order.h"
#include "compiler/choir/passes/parallelize.h"
#include "compiler/choir/passes/tile.h"
#include "compiler/choir/passes/vectorize.h"
#include "compiler/choir/printer.h"
#include "compiler/codegen/x86_64/compile.h"
#include "compiler/codegen/x86_64/emitter.h"
#include "compiler/codegen/x86_64/simd.h"
#include "compiler/wire/wire.h"

namespace tensor = accy::tensor;
namespace choir = accy::choir;
using tensor::DType;
using tensor::Value;
using Clock = std::chrono::steady_clock;
using Args = std::span<const Value>;

namespace {

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

[[noreturn]] void die(const std::string& what, const absl::Status& st) {
  std::fprintf(stderr, "compile_bench: %s: %s\n", what.c_str(), st.ToString().c_str());
  std::exit(1);
}

template <typename T>
T orDie(absl::StatusOr<T> v, const std::string& what) {
  if (!v.ok()) die(what, v.status());
  return *std::move(v);
}

// --- stages ----------------------------------------------------------------

// The fusion limits every compile here uses (--fuse-max-nodes changes one).
choir::FuseLimits g_fuse_limits = accy::x64::cpuFuseLimits();
// --choir: print the final Choir module of each compile to stderr.
bool g_print_choir = false;

struct Row {
  std::string shape;
  int requested = 0;
  size_t nodes = 0;
  std::map<std::string, double> stage;  // best seconds
  double total = 0;
  bool over_budget = false;
};

const char* const kStages[] = {"record",    "valueAndGrad", "vmap",       "wire encode", "wire decode",
                               "lower",     "fuse",         "loop order", "tile",        "vectorize",
                               "parallelize", "emit",       "load"};

void best(Row& r, const std::string& stage, double s) {
  auto it = r.stage.find(stage);
  if (it == r.stage.end() || s < it->second) r.stage[stage] = s;
}

// One full compile of `program`, every stage timed into `r`.
void compileOnce(Row& r, const tensor::Program& program) {
  auto t0 = Clock::now();
  const std::string bytes = accy::wire::encode(program);
  auto t1 = Clock::now();
  best(r, "wire encode", seconds(t0, t1));
  tensor::Program decoded = orDie(accy::wire::decode(bytes), "wire decode");
  auto t2 = Clock::now();
  best(r, "wire decode", seconds(t1, t2));
  const accy::x64::Isa isa = accy::x64::detectIsa();
  choir::Module m = orDie(choir::lowerProgram(decoded), "lower");
  auto t3 = Clock::now();
  best(r, "lower", seconds(t2, t3));
  m = orDie(choir::fuseKernels(std::move(m), g_fuse_limits), "fuse");
  auto t4 = Clock::now();
  best(r, "fuse", seconds(t3, t4));
  m = orDie(choir::orderLoops(std::move(m)), "loop order");
  auto t5 = Clock::now();
  best(r, "loop order", seconds(t4, t5));
  m = orDie(choir::tileReductions(std::move(m), choir::TileOptions{}), "tile");
  auto t6 = Clock::now();
  best(r, "tile", seconds(t5, t6));
  choir::VectorizeOptions vectorize;
  vectorize.vector_bytes = accy::x64::vectorBytes(isa);
  m = orDie(choir::vectorizeLoops(std::move(m), vectorize), "vectorize");
  auto t7 = Clock::now();
  best(r, "vectorize", seconds(t6, t7));
  choir::ParallelizeOptions parallelize;
  parallelize.threads = 1;
  m = orDie(choir::parallelizeLoops(std::move(m), parallelize), "parallelize");
  auto t8 = Clock::now();
  best(r, "parallelize", seconds(t7, t8));
  if (g_print_choir) std::fprintf(stderr, "%s\n", choir::toText(m).c_str());
  accy::x64::EmitOptions emit;
  emit.isa = isa;
  accy::x64::CpuArtifact artifact = orDie(accy::x64::emitModule(m, emit), "emit");
  auto t9 = Clock::now();
  best(r, "emit", seconds(t8, t9));
  // Load what the public compile makes of the same program (the plans
  // included); its own time is the stages above again, so only load() is
  // timed here.
  accy::x64::CompileOptions whole;
  whole.threads = 1;
  whole.fuse_limits = g_fuse_limits;
  whole.isa = isa;
  accy::executable::Executable exe = orDie(accy::x64::compileProgram(decoded, whole), "compile");
  auto t10 = Clock::now();
  auto loaded = orDie(accy::cpu::LoadedExecutable::load(std::move(exe), 1), "load");
  auto t11 = Clock::now();
  best(r, "load", seconds(t10, t11));
  (void)artifact;
  (void)loaded;
}

std::vector<int> parseList(const char* text) {
  std::vector<int> out;
  for (const char* p = text; *p;) {
    out.push_back(std::atoi(p));
    p = std::strchr(p, ',');
    if (!p) break;
    ++p;
  }
  return out;
}

void printRow(const Row& r) {
  std::printf("| %s | %d | %zu |", r.shape.c_str(), r.requested, r.nodes);
  if (r.over_budget && r.stage.empty()) {
    for (size_t i = 0; i < std::size(kStages); ++i) std::printf(" |");
    std::printf(" not run (a smaller size passed the budget) | |\n");
  } else {
    for (const char* s : kStages) {
      auto it = r.stage.find(s);
      if (it == r.stage.end()) std::printf(" - |");
      else std::printf(" %.2f |", it->second * 1e3);
    }
    std::printf(" %.1f ms%s | %.1f us |\n", r.total * 1e3, r.over_budget ? " (over budget, 1 run)" : "",
                r.nodes ? r.total * 1e6 / static_cast<double>(r.nodes) : 0.0);
  }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes = {256, 1024, 4096, 16384};
  std::vector<std::string> shapes = {"chain", "reductions", "fanout", "mlp"};
  double budget = 60;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--sizes=", 8) == 0) {
      sizes = parseList(argv[i] + 8);
    } else if (std::strncmp(argv[i], "--shapes=", 9) == 0) {
      shapes.clear();
      for (const char* p = argv[i] + 9; *p;) {
        const char* comma = std::strchr(p, ',');
        shapes.emplace_back(p, comma ? comma - p : std::strlen(p));
        if (!comma) break;
        p = comma + 1;
      }
    } else if (std::strcmp(argv[i], "--choir") == 0) {
      g_print_choir = true;
    } else if (std::strncmp(argv[i], "--fuse-max-nodes=", 17) == 0) {
      g_fuse_limits.max_nodes = std::atoll(argv[i] + 17);
    } else if (std::strncmp(argv[i], "--budget-seconds=", 17) == 0) {
      budget = std::atof(argv[i] + 17);
    } else {
      std::fprintf(stderr, "usage: compile_bench [--sizes=N,...] [--shapes=chain,reductions,fanout,mlp] [--budget-seconds=S] [--fuse-max-nodes=N] [--choir]\n");
      return 2;
    }
  }
  std::printf("cpu_model: %s\n", accy::bench::cpuModel().c_str());
  // The table, a row as each size finishes: milliseconds per stage, then
  // the total and microseconds per node.
  std::printf("\n| shape | N | nodes |");
  for (const char* s : kStages) std::printf(" %s |", s);
  std::printf(" total | per node |\n|---|---|---|");
  for (size_t i = 0; i < std::size(kStages); ++i) std::printf("---|");
  std::printf("---|---|\n");
  std::fflush(stdout);
  for (const std::string& shape : shapes) {
    bool skip_rest = false;
    for (int n : sizes) {
      Row r;
      r.shape = shape;
      r.requested = n;
      if (skip_rest) {
        r.over_budget = true;
        printRow(r);
        continue;
      }
      for (int rep = 0; rep < 3; ++rep) {
        const auto start = Clock::now();
        tensor::Program program;
        if (shape == "mlp") {
          auto t0 = Clock::now();
          tensor::Function loss = accy::shapes::mlpLoss(accy::shapes::mlpLayers(n));
          auto t1 = Clock::now();
          best(r, "record", seconds(t0, t1));
          std::vector<int> wrt;
          const int inputs = static_cast<int>(loss.program().inputs.size());
          for (int k = 1; k < inputs; ++k) wrt.push_back(k);
          tensor::Function grad = orDie(loss.valueAndGrad({.wrt = wrt}), "valueAndGrad");
          auto t2 = Clock::now();
          best(r, "valueAndGrad", seconds(t1, t2));
          std::vector<tensor::InAxis> in_axes(grad.program().inputs.size(), tensor::unmapped);
          in_axes[0] = tensor::mappedAxis(0);
          tensor::Function batched =
              orDie(grad.vmap({.axis_size = 4, .in_axes = in_axes, .axis_name = "example"}), "vmap");
          auto t3 = Clock::now();
          best(r, "vmap", seconds(t2, t3));
          program = grad.program();
          (void)batched;
        } else {
          auto t0 = Clock::now();
          program = orDie(shape == "chain"        ? accy::shapes::chain(n)
                            : shape == "reductions" ? accy::shapes::reductions(n)
                                                    : accy::shapes::fanout(n),
                            shape);
          best(r, "record", seconds(t0, Clock::now()));
        }
        r.nodes = program.nodes.size();
        compileOnce(r, program);
        const double took = seconds(start, Clock::now());
        if (took > budget) {
          r.over_budget = true;
          skip_rest = true;
          break;
        }
      }
      r.total = 0;
      for (const auto& [stage, s] : r.stage) r.total += s;
      printRow(r);
      std::fprintf(stderr, "%s N=%d (%zu nodes): %.3f s%s\n", shape.c_str(), n, r.nodes, r.total,
                   r.over_budget ? " (over budget)" : "");
    }
  }
  return 0;
}
