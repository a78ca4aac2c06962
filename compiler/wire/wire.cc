#include "compiler/wire/wire.h"

#include <algorithm>

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

namespace {

void toProto(const tensor::Program& program, accy::wire::v1::Program& proto, uint16_t& minor) {
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
    minor = std::max(minor, minorVersionOf(n));
  }
  for (int32_t i : program.inputs) proto.add_inputs(i);
  for (int32_t o : program.outputs) proto.add_outputs(o);
  for (const tensor::Program& body : program.bodies) toProto(body, *proto.add_bodies(), minor);
}

}  // namespace

std::string encode(const tensor::Program& program) {
  accy::wire::v1::Program proto;
  uint16_t minor = 0;
  toProto(program, proto, minor);
  std::string out(kHeaderBytes, '\0');
  out[0] = 'A', out[1] = 'C', out[2] = 'C', out[3] = 'Y';
  out[4] = static_cast<char>(kMajorVersion & 0xff);
  out[5] = static_cast<char>(kMajorVersion >> 8);
  out[6] = static_cast<char>(minor & 0xff);
  out[7] = static_cast<char>(minor >> 8);
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    proto.SerializeToCodedStream(&coded);
  }
  return out;
}

uint16_t minorVersionOf(const tensor::Node& node) {
  // Ops and dtypes are appended (ops.inc, dtype.h): every op number from
  // scan on is 1.4's; from bitAnd on 1.2's, and u32; from take on 1.1's.
  if (static_cast<int>(node.op) >= static_cast<int>(tensor::OpCode::kScan)) return 4;
  if ((node.op == tensor::OpCode::kReduceSum || node.op == tensor::OpCode::kReduceMean) && !node.ints.empty()) {
    return 3;
  }
  if (static_cast<int>(node.op) >= static_cast<int>(tensor::OpCode::kBitAnd) || node.dtype == tensor::DType::u32) {
    return 2;
  }
  if (static_cast<int>(node.op) >= static_cast<int>(tensor::OpCode::kTake)) return 1;
  return node.op == tensor::OpCode::kDot && node.names.size() > 1 ? 1 : 0;
}

namespace {

using google::protobuf::internal::WireFormatLite;

// What a message may hold before it is parsed: counted per node, and over
// the whole program.
struct Counts {
  int64_t nodes = 0;
  int64_t numbers = 0;  // input and output numbers
};

// Counts the varints of a packed field's `length` bytes (one ends at each
// byte below 0x80), reading them.
bool countPacked(google::protobuf::io::CodedInputStream& in, uint32_t length, int64_t* count) {
  for (uint32_t i = 0; i < length; ++i) {
    uint8_t byte = 0;
    if (!in.ReadRaw(&byte, 1)) return false;
    if (byte < 0x80) ++*count;
  }
  return true;
}

// Reads a length-delimited field's length and checks it fits what is left.
bool readLength(google::protobuf::io::CodedInputStream& in, uint32_t* length) {
  return in.ReadVarint32(length) && static_cast<int64_t>(*length) <= in.BytesUntilLimit();
}

absl::Status unparsable() { return invalid("the program message does not parse"); }

// One Node message (`length` bytes): its axes, names, operands and integer
// attributes against the language's limits, every string against the
// longest axis name, without allocating.
absl::Status scanNode(google::protobuf::io::CodedInputStream& in, uint32_t length, int64_t node) {
  const auto outer = in.PushLimit(static_cast<int>(length));
  int64_t axes = 0, names = 0, operands = 0, ints = 0;
  auto tooLong = [&](std::string_view what, uint32_t bytes) {
    return invalid(strCat("node %", node, " has ", what, " of ", bytes, " bytes; axis names have at most ",
                            tensor::kMaxAxisNameBytes));
  };
  while (true) {
    const uint32_t tag = in.ReadTag();
    if (tag == 0) break;
    const int field = static_cast<int>(tag >> 3);
    const auto type = WireFormatLite::GetTagWireType(tag);
    const bool delimited = type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
    if (field == 3 && delimited) {  // Axis { 1: name, 2: extent }
      ++axes;
      uint32_t bytes = 0;
      if (!readLength(in, &bytes)) return unparsable();
      const auto axis = in.PushLimit(static_cast<int>(bytes));
      while (true) {
        const uint32_t t = in.ReadTag();
        if (t == 0) break;
        if ((t >> 3) == 1 && WireFormatLite::GetTagWireType(t) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
          uint32_t name = 0;
          if (!readLength(in, &name)) return unparsable();
          if (name > tensor::kMaxAxisNameBytes) return tooLong("an axis name", name);
          if (!in.Skip(static_cast<int>(name))) return unparsable();
        } else if (!WireFormatLite::SkipField(&in, t)) {
          return unparsable();
        }
      }
      if (!in.ConsumedEntireMessage()) return unparsable();
      in.PopLimit(axis);
    } else if (field == 5 && delimited) {
      ++names;
      uint32_t bytes = 0;
      if (!readLength(in, &bytes)) return unparsable();
      if (bytes > tensor::kMaxAxisNameBytes) return tooLong("a name attribute", bytes);
      if (!in.Skip(static_cast<int>(bytes))) return unparsable();
    } else if ((field == 4 || field == 6) && delimited) {
      uint32_t bytes = 0;
      if (!readLength(in, &bytes) || !countPacked(in, bytes, field == 4 ? &operands : &ints)) return unparsable();
    } else {
      if (field == 4) ++operands;
      if (field == 6) ++ints;
      if (!WireFormatLite::SkipField(&in, tag)) return unparsable();
    }
    auto over = [&](std::string_view what, int64_t limit) {
      return invalid(strCat("node %", node, " has more than ", limit, " ", what,
                                                           " (the language's limit)"));
    };
    if (axes > tensor::kMaxAxes) return over("axes", tensor::kMaxAxes);
    if (names > tensor::kMaxNameAttributes) return over("name attributes", tensor::kMaxNameAttributes);
    if (ints > tensor::kMaxIntAttributes) return over("integer attributes", tensor::kMaxIntAttributes);
    if (operands > tensor::kMaxOperands) return over("operands", tensor::kMaxOperands);
  }
  in.PopLimit(outer);
  return absl::OkStatus();
}

// Scans the Program message (field 1: the name, 2: nodes, 3 and 4: the
// input and output numbers, packed or not) and each node in it, and
// refuses more than the limits allow, before anything is parsed or
// allocated: a parsed node costs a hundred bytes or more whatever its
// encoding costs, an axis forty, an operand four.
absl::Status countBeforeParsing(google::protobuf::io::CodedInputStream& in, const DecodeLimits& limits, Counts& c,
                                int64_t depth) {
  while (true) {
    const uint32_t tag = in.ReadTag();
    if (tag == 0) break;
    const int field = static_cast<int>(tag >> 3);
    const bool delimited = WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
    if (field == 2 && delimited) {
      if (++c.nodes > std::min(limits.max_nodes, tensor::kMaxProgramNodes)) {
        return invalid(strCat("more than ", std::min(limits.max_nodes, tensor::kMaxProgramNodes),
                              " nodes (the limit)"));
      }
      uint32_t bytes = 0;
      if (!readLength(in, &bytes)) return unparsable();
      ACCY_RETURN_IF_ERROR(scanNode(in, bytes, c.nodes - 1));
    } else if (field == 1 && delimited) {
      uint32_t bytes = 0;
      if (!readLength(in, &bytes)) return unparsable();
      if (bytes > tensor::kMaxProgramNameBytes) {
        return invalid(strCat("the program's name has ", bytes,
                                                             " bytes; at most ", tensor::kMaxProgramNameBytes));
      }
      if (!in.Skip(static_cast<int>(bytes))) return unparsable();
    } else if ((field == 3 || field == 4) && delimited) {
      uint32_t bytes = 0;
      if (!readLength(in, &bytes) || !countPacked(in, bytes, &c.numbers)) return unparsable();
    } else if (field == 5 && delimited) {  // a loop body: a Program, counted with the rest
      if (depth >= tensor::kMaxLoopDepth) {
        return invalid(strCat("loop bodies nest more than ", tensor::kMaxLoopDepth, " deep (the language's limit)"));
      }
      uint32_t bytes = 0;
      if (!readLength(in, &bytes)) return unparsable();
      const auto body = in.PushLimit(static_cast<int>(bytes));
      ACCY_RETURN_IF_ERROR(countBeforeParsing(in, limits, c, depth + 1));
      in.PopLimit(body);
    } else {
      if (field == 3 || field == 4) ++c.numbers;
      if (!WireFormatLite::SkipField(&in, tag)) return unparsable();
    }
    if (c.numbers > 2 * limits.max_nodes) {
      return invalid(strCat("more than ", 2 * limits.max_nodes, " input and output numbers (the limit)"));
    }
  }
  if (!in.ConsumedEntireMessage()) return unparsable();
  return absl::OkStatus();
}

absl::Status countBeforeParsing(std::string_view message, const DecodeLimits& limits) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(message.data()),
                                            static_cast<int>(message.size()));
  Counts c;
  return countBeforeParsing(in, limits, c, 0);
}

// The program a parsed message holds, bodies and all; each node's op,
// dtype, axes and wire version checked (validateProgram checks the rest).
absl::StatusOr<tensor::Program> fromProto(const accy::wire::v1::Program& proto, const DecodeLimits& limits,
                                          uint16_t major, uint16_t minor) {
  tensor::Program program;
  program.name = proto.name();
  program.nodes.reserve(proto.nodes_size());
  for (int i = 0; i < proto.nodes_size(); ++i) {
    const accy::wire::v1::Node& p = proto.nodes(i);
    if (p.op() >= static_cast<uint32_t>(tensor::kOpCount)) {
      return invalid(strCat("node %", i, " has unknown op number ", p.op()));
    }
    if (p.dtype() > static_cast<uint32_t>(tensor::DType::u32)) {
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
    // Extents are checked against the decoder's limit of one value, and
    // the message names that limit.
    if (auto st = tensor::checkAxes(strCat("node %", i), n.dtype, n.axes, limits.max_value_bytes); !st.ok()) {
      return invalid(std::string(st.message()));
    }
    if (minorVersionOf(n) > minor) {
      return invalid(strCat("node %", i, " (", tensor::opName(n.op), ") needs wire version ", kMajorVersion, ".",
                            minorVersionOf(n), " but the header says ", major, ".", minor));
    }
    program.nodes.push_back(std::move(n));
  }
  program.inputs.assign(proto.inputs().begin(), proto.inputs().end());
  program.outputs.assign(proto.outputs().begin(), proto.outputs().end());
  if (proto.bodies_size() > 0 && minor < 4) {
    return invalid(strCat("the program has loop bodies, which need wire version ", kMajorVersion,
                          ".4, but the header says ", major, ".", minor));
  }
  for (int b = 0; b < proto.bodies_size(); ++b) {
    auto body = fromProto(proto.bodies(b), limits, major, minor);
    if (!body.ok()) return invalid(strCat("body ", b, ": ", body.status().message()));
    program.bodies.push_back(std::move(*body));
  }
  return program;
}

}  // namespace

absl::StatusOr<int64_t> countNodes(std::string_view bytes, int64_t stop_after) {
  if (bytes.size() < kHeaderBytes || bytes.substr(0, 4) != "ACCY") return invalid("not an encoded program");
  const std::string_view message = bytes.substr(kHeaderBytes);
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(message.data()),
                                            static_cast<int>(message.size()));
  int64_t nodes = 0;
  while (nodes <= stop_after) {
    const uint32_t tag = in.ReadTag();
    if (tag == 0) break;
    if ((tag >> 3) == 2) ++nodes;
    if (!WireFormatLite::SkipField(&in, tag)) return unparsable();
  }
  return nodes;
}

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
  if (minor > limits.reader_minor) {
    return makeError(ErrorKind::kUnsupportedVersion,
                     strCat("wire: version ", major, ".", minor, " is newer than this reader's ", kMajorVersion,
                            ".", limits.reader_minor, " (1.1 added take, scatter_add, pad, window and dot over "
                            "several axes; 1.2 the dtype u32 and the bit operations; 1.3 compensated sum and mean; 1.4 scan, "
                            "while_loop and their bodies)"));
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
  ACCY_ASSIGN_OR_RETURN(tensor::Program program, fromProto(proto, limits, major, minor));
  if (auto st = tensor::validateProgram(program); !st.ok()) {
    return invalid(std::string(st.message()));
  }
  return program;
}

}  // namespace accy::wire
