#include "compiler/wire/wire.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>

#include "accy/wire/v1/program.pb.h"
#include "base/errors.h"
#include "base/status_macros.h"
#include "base/strings.h"

namespace accy::wire {
namespace {

absl::Status invalid(std::string what) { return makeError(ErrorKind::kInvalidProgram, strCat("wire: ", what)); }

}  // namespace

std::string encode(const tensor::Program& program) {
  accy::wire::v1::Program proto;
  proto.set_name(program.name);
  for (const tensor::Node& n : program.nodes) {
    accy::wire::v1::Node* p = proto.add_nodes();
    p->set_op(static_cast<uint32_t>(n.op));
    p->set_dtype(static_cast<uint32_t>(n.dtype));
    for (const tensor::Axis& a : n.axes) {
      accy::wire::v1::Axis* axis = p->add_axes();
      axis->set_name(a.name);
      axis->set_extent(a.extent);
    }
    for (int32_t o : n.operands) p->add_operands(o);
    for (const std::string& s : n.names) p->add_names(s);
    for (int64_t i : n.ints) p->add_ints(i);
    p->set_scalar(n.scalar);
  }
  for (int32_t i : program.inputs) proto.add_inputs(i);
  for (int32_t o : program.outputs) proto.add_outputs(o);

  std::string out(kHeaderBytes, '\0');
  out[0] = 'A', out[1] = 'C', out[2] = 'C', out[3] = 'Y';
  out[4] = static_cast<char>(kMajorVersion & 0xff);
  out[5] = static_cast<char>(kMajorVersion >> 8);
  out[6] = static_cast<char>(kMinorVersion & 0xff);
  out[7] = static_cast<char>(kMinorVersion >> 8);
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    proto.SerializeToCodedStream(&coded);
  }
  return out;
}

namespace {

// Scans the top level of the Program message (field 2: nodes, 3 and 4: the
// input and output numbers, packed or not) and refuses more of them than
// the limits allow, without allocating.
absl::Status countBeforeParsing(std::string_view message, const DecodeLimits& limits) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(message.data()),
                                            static_cast<int>(message.size()));
  int64_t nodes = 0, numbers = 0;
  while (true) {
    const uint32_t tag = in.ReadTag();
    if (tag == 0) break;
    const int field = static_cast<int>(tag >> 3);
    const auto type = google::protobuf::internal::WireFormatLite::GetTagWireType(tag);
    if (field == 2) ++nodes;
    if ((field == 3 || field == 4) && type == google::protobuf::internal::WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      uint32_t length = 0;
      if (!in.ReadVarint32(&length)) return invalid("the program message does not parse");
      // One varint ends at each byte below 0x80.
      for (uint32_t i = 0; i < length; ++i) {
        uint8_t byte = 0;
        if (!in.ReadRaw(&byte, 1)) return invalid("the program message does not parse");
        if (byte < 0x80) ++numbers;
      }
    } else {
      if (field == 3 || field == 4) ++numbers;
      if (!google::protobuf::internal::WireFormatLite::SkipField(&in, tag)) {
        return invalid("the program message does not parse");
      }
    }
    if (nodes > limits.max_nodes) return invalid(strCat("more than ", limits.max_nodes, " nodes (the limit)"));
    if (numbers > 2 * limits.max_nodes) {
      return invalid(strCat("more than ", 2 * limits.max_nodes, " input and output numbers (the limit)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<tensor::Program> decode(std::string_view bytes, const DecodeLimits& limits) {
  if (bytes.size() < kHeaderBytes) {
    return invalid(strCat("need at least ", kHeaderBytes, " bytes of header, got ", bytes.size()));
  }
  if (bytes.substr(0, 4) != "ACCY") return invalid("missing the magic \"ACCY\"");
  const uint16_t major = static_cast<uint8_t>(bytes[4]) | static_cast<uint16_t>(static_cast<uint8_t>(bytes[5]) << 8);
  const uint16_t minor = static_cast<uint8_t>(bytes[6]) | static_cast<uint16_t>(static_cast<uint8_t>(bytes[7]) << 8);
  if (major != kMajorVersion) {
    return makeError(ErrorKind::kUnsupportedVersion,
                     strCat("wire: version ", major, ".", minor, "; this build reads major version ",
                            kMajorVersion));
  }
  if (static_cast<int64_t>(bytes.size()) > limits.max_bytes) {
    return invalid(strCat(bytes.size(), " bytes exceed the limit of ", limits.max_bytes));
  }
  // Count the nodes and the input and output numbers before parsing: a
  // parsed node costs a hundred bytes or more whatever its encoding
  // costs, so a message of empty nodes (two bytes each) would take
  // gigabytes before a count taken after parsing could refuse it.
  ACCY_RETURN_IF_ERROR(countBeforeParsing(bytes.substr(kHeaderBytes), limits));
  accy::wire::v1::Program proto;
  if (!proto.ParseFromArray(bytes.data() + kHeaderBytes, static_cast<int>(bytes.size() - kHeaderBytes))) {
    return invalid("the program message does not parse");
  }
  if (proto.nodes_size() > limits.max_nodes) {
    return invalid(strCat(proto.nodes_size(), " nodes exceed the limit of ", limits.max_nodes));
  }
  tensor::Program program;
  program.name = proto.name();
  program.nodes.reserve(proto.nodes_size());
  for (int i = 0; i < proto.nodes_size(); ++i) {
    const accy::wire::v1::Node& p = proto.nodes(i);
    if (p.op() >= static_cast<uint32_t>(tensor::kOpCount)) {
      return invalid(strCat("node %", i, " has unknown op number ", p.op()));
    }
    if (p.dtype() > static_cast<uint32_t>(tensor::DType::bool_)) {
      return invalid(strCat("node %", i, " has unknown dtype number ", p.dtype()));
    }
    tensor::Node n;
    n.op = static_cast<tensor::OpCode>(p.op());
    n.dtype = static_cast<tensor::DType>(p.dtype());
    for (const accy::wire::v1::Axis& a : p.axes()) n.axes.push_back(tensor::Axis{a.name(), a.extent()});
    n.operands.assign(p.operands().begin(), p.operands().end());
    n.names.assign(p.names().begin(), p.names().end());
    n.ints.assign(p.ints().begin(), p.ints().end());
    n.scalar = p.scalar();
    if (auto st = tensor::checkAxes(strCat("node %", i), n.dtype, n.axes); !st.ok()) {
      return invalid(std::string(st.message()));
    }
    if (n.spec().byteSize() > limits.max_value_bytes) {
      return invalid(strCat("node %", i, " holds ", n.spec().byteSize(), " bytes, above the limit of ",
                            limits.max_value_bytes));
    }
    program.nodes.push_back(std::move(n));
  }
  program.inputs.assign(proto.inputs().begin(), proto.inputs().end());
  program.outputs.assign(proto.outputs().begin(), proto.outputs().end());
  if (auto st = tensor::validateProgram(program); !st.ok()) {
    return invalid(std::string(st.message()));
  }
  return program;
}

}  // namespace accy::wire
