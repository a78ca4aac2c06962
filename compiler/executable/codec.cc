#include "compiler/executable/codec.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "accy/executable/v1/executable.pb.h"
#include "base/errors.h"
#include "base/status_macros.h"
#include "base/strings.h"

namespace accy::executable {
namespace {

namespace pb = accy::executable::v1;

void toProto(const tensor::Spec& s, pb::Spec* p) {
  p->set_dtype(static_cast<uint32_t>(s.dtype));
  for (const tensor::Axis& a : s.axes) {
    pb::Axis* ax = p->add_axes();
    ax->set_name(a.name);
    ax->set_extent(a.extent);
  }
}

absl::StatusOr<tensor::Spec> fromProto(const pb::Spec& p) {
  if (p.dtype() > static_cast<uint32_t>(tensor::DType::u32)) {
    return makeError(ErrorKind::kInvalidProgram, "executable: unknown dtype");
  }
  tensor::Spec s;
  s.dtype = static_cast<tensor::DType>(p.dtype());
  for (const pb::Axis& a : p.axes()) s.axes.push_back(tensor::Axis{a.name(), a.extent()});
  ACCY_RETURN_IF_ERROR(tensor::checkAxes("executable", s.dtype, s.axes));
  return s;
}

}  // namespace

std::string serializeExecutable(const Executable& exe) {
  pb::Executable p;
  p.set_target(exe.target);
  p.set_isa(exe.isa);
  p.set_code(std::string(exe.code.begin(), exe.code.end()));
  for (const BufferPlan& b : exe.artifact_plan.buffers) {
    pb::BufferPlan* q = p.add_buffers();
    q->set_role(static_cast<uint32_t>(b.role));
    q->set_io_index(b.io_index);
    q->set_dtype(static_cast<uint32_t>(b.dtype));
    q->set_bytes(b.bytes);
    q->set_alignment(b.alignment);
    q->set_scratch_offset(b.scratch_offset);
  }
  p.set_scratch_bytes(exe.artifact_plan.scratch_bytes);
  for (const LaunchStep& s : exe.launch_plan.steps) {
    pb::LaunchStep* q = p.add_steps();
    q->set_kernel(s.kernel);
    q->set_entry_offset(s.entry_offset);
    q->set_parallel_extent(s.parallel_extent);
    q->set_work(s.work);
    q->set_group_size(s.group_size);
  }
  for (const tensor::Spec& s : exe.inputs) toProto(s, p.add_inputs());
  for (const tensor::Spec& s : exe.outputs) toProto(s, p.add_outputs());
  std::string out;
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  p.SerializeToCodedStream(&coded);
  coded.Trim();
  return out;
}

absl::StatusOr<Executable> parseExecutable(std::string_view bytes) {
  pb::Executable p;
  if (!p.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return makeError(ErrorKind::kInvalidProgram, "executable: the bytes do not parse");
  }
  Executable exe;
  exe.target = p.target();
  exe.isa = p.isa();
  exe.code.assign(p.code().begin(), p.code().end());
  for (const pb::BufferPlan& q : p.buffers()) {
    if (q.role() > 2 || q.dtype() > static_cast<uint32_t>(tensor::DType::u32) || q.bytes() < 0) {
      return makeError(ErrorKind::kInvalidProgram, "executable: a buffer plan is out of range");
    }
    BufferPlan b;
    b.role = static_cast<choir::BufferRole>(q.role());
    b.io_index = q.io_index();
    b.dtype = static_cast<tensor::DType>(q.dtype());
    b.bytes = q.bytes();
    b.alignment = q.alignment();
    b.scratch_offset = q.scratch_offset();
    exe.artifact_plan.buffers.push_back(b);
  }
  exe.artifact_plan.scratch_bytes = p.scratch_bytes();
  for (const pb::LaunchStep& q : p.steps()) {
    exe.launch_plan.steps.push_back(LaunchStep{q.kernel(), q.entry_offset(), q.parallel_extent(), q.work(), q.group_size()});
  }
  for (const pb::Spec& s : p.inputs()) {
    ACCY_ASSIGN_OR_RETURN(tensor::Spec spec, fromProto(s));
    exe.inputs.push_back(std::move(spec));
  }
  for (const pb::Spec& s : p.outputs()) {
    ACCY_ASSIGN_OR_RETURN(tensor::Spec spec, fromProto(s));
    exe.outputs.push_back(std::move(spec));
  }
  ACCY_RETURN_IF_ERROR(validateExecutable(exe));
  return exe;
}

}  // namespace accy::executable
