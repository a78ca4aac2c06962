#include "compiler/codegen/x86_64/emitter.h"

#include "compiler/codegen/x86_64/kernel_emitter.h"
#include "base/errors.h"
#include "compiler/choir/rewrite.h"
#include "base/status_macros.h"
#include "base/strings.h"

namespace accy::x64 {
namespace {

class ErrorCollector : public asmjit::ErrorHandler {
 public:
  void handleError(asmjit::Error err, const char* message, asmjit::BaseEmitter*) override {
    if (first == asmjit::kErrorOk) {
      first = err;
      text = message;
    }
  }
  asmjit::Error first = asmjit::kErrorOk;
  std::string text;
};

}  // namespace

absl::StatusOr<CpuArtifact> emitModule(const choir::Module& module, const EmitOptions& options) {
  asmjit::CodeHolder code;
  asmjit::Environment env(asmjit::Arch::kX64);
  code.init(env);
  ErrorCollector errors;
  code.setErrorHandler(&errors);
  asmjit::StringLogger logger;
  if (options.assembly != nullptr) code.setLogger(&logger);
  CpuArtifact artifact;
  artifact.isa = options.isa;
  std::vector<asmjit::Label> entries;
  // One compiler per kernel, each finalized (register allocation and
  // encoding) before the next is emitted, so that a caller's stop check
  // (compiler/choir/work.h) is asked between kernels: one finalize of a
  // whole module of hundreds of kernels ran for seconds with no look.
  // Labels belong to the code holder and outlive each compiler; each
  // compiler appends to the section where the last one ended.
  for (const choir::Kernel& k : module.kernels) {
    asmjit::x86::Compiler cc(&code);
    if (options.assembly != nullptr) cc.commentf("kernel %s", k.name.c_str());
    asmjit::Label entry;
    KernelEmitter emitter(cc, module, options.isa, options.stream_stores_above);
    ACCY_RETURN_IF_ERROR(emitter.emit(k, &entry));
    entries.push_back(entry);
    KernelEntry e;
    e.name = k.name;
    e.work = choir::statementPoints(k.body);
    if (k.body.size() == 1 && k.body[0].kind == choir::StmtKind::kLoop &&
        k.body[0].loop.tag == choir::LoopTag::kCpuParallel) {
      e.parallel_extent = k.body[0].loop.extent;
    }
    artifact.kernels.push_back(e);
    cc.finalize();
    if (errors.first != asmjit::kErrorOk) break;
    choir::countWork(choir::kStopLookEvery);  // a look at the stop check per kernel
  }
  if (errors.first == asmjit::kErrorOk) code.flatten();
  if (errors.first == asmjit::kErrorOk) code.resolveUnresolvedLinks();
  if (errors.first == asmjit::kErrorOk) code.relocateToBase(0);
  if (errors.first != asmjit::kErrorOk) {
    return makeError(ErrorKind::kCompileFailed,
                     strCat("x86-64 emitter: asmjit: ", errors.text, " (",
                            asmjit::DebugUtils::errorAsString(errors.first), ")"));
  }
  artifact.code.resize(code.codeSize());
  code.copyFlattenedData(artifact.code.data(), artifact.code.size(),
                         asmjit::CopySectionFlags::kPadSectionBuffer);
  for (size_t k = 0; k < entries.size(); ++k) {
    artifact.kernels[k].offset = code.labelOffsetFromBase(entries[k]);
  }
  if (options.assembly != nullptr) *options.assembly = logger.data();
  return artifact;
}

}  // namespace accy::x64
