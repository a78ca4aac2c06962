// Accy's public C++ API. Link `//:accy`.
//
//   namespace tensor = accy::tensor;
//   tensor::Spec s = tensor::spec(tensor::DType::f32, {{"point", 16}});
//   absl::StatusOr<tensor::Program> p = tensor::define("mismatch", specs, fn);
//   auto outputs = tensor::evaluate(*p, {accy::bytes(in0), ...});
//
// See docs/API.md for the contract of each piece.
#ifndef ACCY_ACCY_ACCY_H_
#define ACCY_ACCY_ACCY_H_

#include "accy/bytes.h"
#include "accy/cpu.h"
#include "accy/function.h"
#include "accy/version.h"
#include "compiler/tensor/builder.h"
#include "compiler/tensor/dtype.h"
#include "base/errors.h"
#include "compiler/tensor/evaluate.h"
#include "compiler/tensor/loops.h"
#include "compiler/tensor/program.h"
#include "compiler/tensor/random.h"
#include "compiler/wire/wire.h"

#endif  // ACCY_ACCY_ACCY_H_
