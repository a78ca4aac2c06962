"""The C ABI (accy/accy_c.h) from Python through ctypes, on libaccy_c.so.

The same checks as client/accy_c_test.c: the tone example compiled from the
checked-in wire bytes, descriptors, runs, and each failure a caller can
provoke cheaply, asserted by status number. Standard library only.

    accy_c_test.py LIBACCY_C_SO MISMATCH_WIRE MISMATCH8_WIRE
"""

import ctypes
import math
import sys
import unittest

# Status numbers, fixed forever.
OK = 0
INVALID_PROGRAM = 1
UNSUPPORTED_VERSION = 2
INVALID_HANDLE = 3
INVALID_BUFFER = 4
TOO_MANY_PROGRAMS = 5
OUT_OF_MEMORY = 6
COMPILE_FAILED = 7
LAUNCH_FAILED = 8

DTYPE_F32 = 0

POINTS = 16
GUESSES = 8
MAX_PROGRAMS = 64


class Handle(ctypes.Structure):
    _fields_ = [("index", ctypes.c_uint32), ("generation", ctypes.c_uint32)]


class Descriptor(ctypes.Structure):
    _fields_ = [
        ("dtype", ctypes.c_uint32),
        ("rank", ctypes.c_uint32),
        ("axis_names", ctypes.POINTER(ctypes.c_char_p)),
        ("extents", ctypes.POINTER(ctypes.c_int64)),
        ("byte_size", ctypes.c_uint64),
        ("alignment", ctypes.c_uint32),
    ]


class ValueInfo(ctypes.Structure):
    """accy_value_info as of 1.1 (every field 8 bytes)."""
    _fields_ = [
        ("struct_size", ctypes.c_uint64),
        ("dtype", ctypes.c_uint64),
        ("rank", ctypes.c_uint64),
        ("axis_names", ctypes.POINTER(ctypes.c_char_p)),
        ("extents", ctypes.POINTER(ctypes.c_int64)),
        ("byte_size", ctypes.c_uint64),
        ("alignment", ctypes.c_uint64),
    ]


class OldOptions(ctypes.Structure):
    """accy_session_options as a caller built against a header whose
    struct ended after max_programs would lay it out."""
    _fields_ = [
        ("struct_size", ctypes.c_uint64),
        ("threads", ctypes.c_uint64),
        ("max_programs", ctypes.c_uint64),
    ]


LIB = None
WIRE = b""
WIRE8 = b""


def load(path):
    lib = ctypes.CDLL(path)
    p_void = ctypes.c_void_p
    status = ctypes.c_uint32
    size_p = ctypes.POINTER(ctypes.c_size_t)
    signatures = {
        "accy_c_api_version": (ctypes.c_uint32, []),
        "accy_session_create": (status, [ctypes.POINTER(p_void)]),
        "accy_session_destroy": (None, [p_void]),
        "accy_compile": (status, [p_void, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(Handle)]),
        "accy_input_count": (status, [p_void, Handle, size_p]),
        "accy_output_count": (status, [p_void, Handle, size_p]),
        "accy_input_descriptor": (status, [p_void, Handle, ctypes.c_size_t, ctypes.POINTER(Descriptor)]),
        "accy_output_descriptor": (status, [p_void, Handle, ctypes.c_size_t, ctypes.POINTER(Descriptor)]),
        "accy_invoke": (status, [p_void, Handle, ctypes.POINTER(p_void), size_p, ctypes.c_size_t,
                                 ctypes.POINTER(p_void), size_p, ctypes.c_size_t]),
        "accy_release": (status, [p_void, Handle]),
        "accy_last_cause": (ctypes.c_char_p, [p_void]),
        "accy_session_create_with_options": (status, [p_void, ctypes.POINTER(p_void)]),
        "accy_describe": (status, [p_void, Handle, ctypes.c_uint32, ctypes.c_size_t, ctypes.POINTER(ValueInfo)]),
    }
    for name, (restype, argtypes) in signatures.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes
    return lib


def f32(values):
    return (ctypes.c_float * len(values))(*values)


def samples():
    """time[i] = 0.25 i and sample[i] = sin(3 time[i]), as float32."""
    time = f32([0.25 * i for i in range(POINTS)])
    sample = f32([math.sin(3.0 * time[i]) for i in range(POINTS)])
    return time, sample


def expected_mismatch(frequency):
    """The mismatch for one guess, in double precision."""
    total = 0.0
    for i in range(POINTS):
        t = 0.25 * i
        gap = math.sin(frequency * t) - math.sin(3.0 * t)
        total += gap * gap
    return total


class Session:
    """A session for one test, destroyed with it."""

    def __init__(self):
        self.ptr = ctypes.c_void_p()
        status = LIB.accy_session_create(ctypes.byref(self.ptr))
        assert status == OK and self.ptr.value, status

    def close(self):
        LIB.accy_session_destroy(self.ptr)
        self.ptr = ctypes.c_void_p()

    def compile(self, data):
        handle = Handle(77, 77)
        status = LIB.accy_compile(self.ptr, data, len(data), ctypes.byref(handle))
        return status, handle

    def invoke(self, handle, inputs, outputs, input_count=None, output_count=None):
        n_in = len(inputs) if input_count is None else input_count
        n_out = len(outputs) if output_count is None else output_count
        in_ptrs = (ctypes.c_void_p * max(1, len(inputs)))(*[ctypes.addressof(b) for b in inputs])
        in_sizes = (ctypes.c_size_t * max(1, len(inputs)))(*[ctypes.sizeof(b) for b in inputs])
        out_ptrs = (ctypes.c_void_p * max(1, len(outputs)))(*[ctypes.addressof(b) for b in outputs])
        out_sizes = (ctypes.c_size_t * max(1, len(outputs)))(*[ctypes.sizeof(b) for b in outputs])
        return LIB.accy_invoke(self.ptr, handle, in_ptrs, in_sizes, n_in, out_ptrs, out_sizes, n_out)

    def count(self, handle, inputs=True):
        n = ctypes.c_size_t(12345)
        fn = LIB.accy_input_count if inputs else LIB.accy_output_count
        return fn(self.ptr, handle, ctypes.byref(n)), n.value

    def descriptor(self, handle, i, inputs=True):
        d = Descriptor()
        fn = LIB.accy_input_descriptor if inputs else LIB.accy_output_descriptor
        return fn(self.ptr, handle, i, ctypes.byref(d)), d

    def last_cause(self):
        return LIB.accy_last_cause(self.ptr).decode()


def axes(d):
    return [(d.axis_names[k].decode(), d.extents[k]) for k in range(d.rank)]


class AccyCTest(unittest.TestCase):
    def setUp(self):
        self.s = Session()

    def tearDown(self):
        self.s.close()

    def test_version(self):
        self.assertEqual(LIB.accy_c_api_version(), (1 << 16) | 1)
        self.assertEqual(ctypes.sizeof(Handle), 8)
        if ctypes.sizeof(ctypes.c_void_p) == 8:
            self.assertEqual(ctypes.sizeof(Descriptor), 40)

    def test_an_older_callers_options_struct(self):
        old = OldOptions(ctypes.sizeof(OldOptions), 1, 1)
        ptr = ctypes.c_void_p()
        self.assertEqual(LIB.accy_session_create_with_options(ctypes.byref(old), ctypes.byref(ptr)), OK)
        try:
            handle = Handle()
            self.assertEqual(LIB.accy_compile(ptr, WIRE, len(WIRE), ctypes.byref(handle)), OK)
            # max_programs = 1 took effect.
            self.assertEqual(LIB.accy_compile(ptr, WIRE, len(WIRE), ctypes.byref(Handle())), 5)
            info = ValueInfo(ctypes.sizeof(ValueInfo))
            self.assertEqual(LIB.accy_describe(ptr, handle, 0, 1, ctypes.byref(info)), OK)
            self.assertEqual((info.dtype, info.rank, info.byte_size), (0, 1, 64))
            self.assertEqual(info.axis_names[0], b"point")
        finally:
            LIB.accy_session_destroy(ptr)

    def test_only_the_c_abi_is_exported(self):
        self.assertFalse(hasattr(LIB, "_ZN4accy7session7SessionC1ERKNS0_14SessionOptionsE"))  # Session(options)

    def test_null_arguments(self):
        null = None
        h = Handle(0, 0)
        n = ctypes.c_size_t()
        d = Descriptor()
        self.assertEqual(LIB.accy_session_create(null), INVALID_BUFFER)
        LIB.accy_session_destroy(null)
        self.assertEqual(LIB.accy_compile(null, WIRE, len(WIRE), ctypes.byref(h)), INVALID_BUFFER)
        self.assertEqual(LIB.accy_input_count(null, h, ctypes.byref(n)), INVALID_BUFFER)
        self.assertEqual(LIB.accy_output_count(null, h, ctypes.byref(n)), INVALID_BUFFER)
        self.assertEqual(LIB.accy_input_descriptor(null, h, 0, ctypes.byref(d)), INVALID_BUFFER)
        self.assertEqual(LIB.accy_output_descriptor(null, h, 0, ctypes.byref(d)), INVALID_BUFFER)
        self.assertEqual(LIB.accy_invoke(null, h, null, null, 0, null, null, 0), INVALID_BUFFER)
        self.assertEqual(LIB.accy_release(null, h), INVALID_BUFFER)
        self.assertEqual(LIB.accy_last_cause(null), b"")

        s = self.s.ptr
        self.assertEqual(self.s.last_cause(), "")
        self.assertEqual(LIB.accy_compile(s, WIRE, len(WIRE), null), INVALID_BUFFER)
        self.assertEqual(LIB.accy_compile(s, null, len(WIRE), ctypes.byref(h)), INVALID_BUFFER)
        status, h = self.s.compile(WIRE)
        self.assertEqual(status, OK)
        self.assertEqual(LIB.accy_input_count(s, h, null), INVALID_BUFFER)
        self.assertEqual(LIB.accy_output_count(s, h, null), INVALID_BUFFER)
        self.assertEqual(LIB.accy_input_descriptor(s, h, 0, null), INVALID_BUFFER)
        self.assertEqual(LIB.accy_output_descriptor(s, h, 0, null), INVALID_BUFFER)
        x = f32([0.0])
        ptrs = (ctypes.c_void_p * 1)(ctypes.addressof(x))
        sizes = (ctypes.c_size_t * 1)(4)
        null_ptrs = (ctypes.c_void_p * 1)(None)
        self.assertEqual(LIB.accy_invoke(s, h, null, sizes, 3, ptrs, sizes, 1), INVALID_BUFFER)
        self.assertEqual(LIB.accy_invoke(s, h, ptrs, null, 3, ptrs, sizes, 1), INVALID_BUFFER)
        self.assertEqual(LIB.accy_invoke(s, h, ptrs, sizes, 1, null, sizes, 1), INVALID_BUFFER)
        self.assertEqual(LIB.accy_invoke(s, h, ptrs, sizes, 1, ptrs, null, 1), INVALID_BUFFER)
        self.assertEqual(LIB.accy_invoke(s, h, null_ptrs, sizes, 1, ptrs, sizes, 1), INVALID_BUFFER)
        self.assertEqual(LIB.accy_invoke(s, h, null, null, 0, null, null, 0), INVALID_BUFFER)
        self.assertEqual(self.s.last_cause(), "")
        self.assertEqual(LIB.accy_release(s, h), OK)

    def test_compile_describe_invoke_release(self):
        status, h = self.s.compile(WIRE)
        self.assertEqual(status, OK)
        self.assertEqual(self.s.count(h), (OK, 3))
        self.assertEqual(self.s.count(h, inputs=False), (OK, 1))

        status, d = self.s.descriptor(h, 0)
        self.assertEqual(status, OK)
        self.assertEqual((d.dtype, d.rank, d.byte_size, d.alignment), (DTYPE_F32, 0, 4, 4))
        for i in (1, 2):
            status, d = self.s.descriptor(h, i)
            self.assertEqual(status, OK)
            self.assertEqual((d.dtype, d.rank, d.byte_size, d.alignment), (DTYPE_F32, 1, 64, 4))
            self.assertEqual(axes(d), [("point", POINTS)])
        self.assertEqual(self.s.descriptor(h, 3)[0], INVALID_BUFFER)
        status, d = self.s.descriptor(h, 0, inputs=False)
        self.assertEqual(status, OK)
        self.assertEqual((d.dtype, d.rank, d.byte_size, d.alignment), (DTYPE_F32, 0, 4, 4))
        self.assertEqual(self.s.descriptor(h, 1, inputs=False)[0], INVALID_BUFFER)

        time, sample = samples()
        before = (bytes(time), bytes(sample))
        frequency = f32([2.5])
        value = f32([-1.0])
        self.assertEqual(self.s.invoke(h, [frequency, time, sample], [value]), OK)
        expected = expected_mismatch(2.5)
        print(f"mismatch(2.5) = {value[0]:.6f} (double loops: {expected:.6f})")
        self.assertAlmostEqual(value[0], 8.656, delta=1e-3)
        self.assertAlmostEqual(value[0], expected, delta=1e-3)
        self.assertEqual((bytes(time), bytes(sample)), before)  # inputs unchanged
        self.assertEqual(self.s.last_cause(), "")

        frequency[0] = 3.0
        self.assertEqual(self.s.invoke(h, [frequency, time, sample], [value]), OK)
        self.assertAlmostEqual(value[0], 0.0, delta=1e-3)

        # A wrong count is returned directly and leaves last_cause alone.
        self.assertEqual(self.s.invoke(h, [frequency, time, sample], [value], input_count=2), INVALID_BUFFER)
        self.assertEqual(self.s.invoke(h, [frequency, time], [value]), INVALID_BUFFER)
        self.assertEqual(self.s.invoke(h, [frequency, time, sample], [value], output_count=0), INVALID_BUFFER)
        self.assertEqual(self.s.last_cause(), "")
        # A wrong size goes through the mapping and leaves a cause.
        short = f32([0.0] * (POINTS - 1))
        self.assertEqual(self.s.invoke(h, [frequency, short, sample], [value]), INVALID_BUFFER)
        print("last cause:", self.s.last_cause())
        self.assertNotEqual(self.s.last_cause(), "")
        # An output sharing bytes with an input.
        self.assertEqual(self.s.invoke(h, [frequency, time, sample], [frequency]), INVALID_BUFFER)

        # Released: the handle and every copy are refused, also once the
        # slot is reused.
        copy = Handle(h.index, h.generation)
        self.assertEqual(LIB.accy_release(self.s.ptr, h), OK)
        self.assertEqual(LIB.accy_release(self.s.ptr, copy), INVALID_HANDLE)
        self.assertEqual(self.s.count(copy)[0], INVALID_HANDLE)
        self.assertEqual(self.s.count(copy, inputs=False)[0], INVALID_HANDLE)
        self.assertEqual(self.s.descriptor(copy, 0)[0], INVALID_HANDLE)
        self.assertEqual(self.s.descriptor(copy, 0, inputs=False)[0], INVALID_HANDLE)
        self.assertEqual(self.s.invoke(copy, [frequency, time, sample], [value]), INVALID_HANDLE)
        status, again = self.s.compile(WIRE)
        self.assertEqual(status, OK)
        self.assertEqual(again.index, copy.index)
        self.assertNotEqual(again.generation, copy.generation)
        self.assertEqual(self.s.count(copy)[0], INVALID_HANDLE)
        self.assertEqual(self.s.count(again), (OK, 3))
        self.assertEqual(LIB.accy_release(self.s.ptr, Handle(999, 0)), INVALID_HANDLE)

    def test_guess_axis(self):
        status, h = self.s.compile(WIRE8)
        self.assertEqual(status, OK)
        for inputs in (True, False):
            status, d = self.s.descriptor(h, 0, inputs=inputs)
            self.assertEqual(status, OK)
            self.assertEqual((d.rank, d.byte_size), (1, 4 * GUESSES))
            self.assertEqual(axes(d), [("guess", GUESSES)])
        time, sample = samples()
        guesses = f32([1.0 + 0.5 * g for g in range(GUESSES)])  # 1 .. 4.5
        values = f32([0.0] * GUESSES)
        self.assertEqual(self.s.invoke(h, [guesses, time, sample], [values]), OK)
        for g in range(GUESSES):
            expected = expected_mismatch(guesses[g])
            print(f"mismatch({guesses[g]:.1f}) = {values[g]:.6f} (double loops: {expected:.6f})")
            self.assertAlmostEqual(values[g], expected, delta=1e-3 * (1 + abs(expected)))
        self.assertAlmostEqual(values[3], 8.656, delta=1e-3)  # guess 2.5
        self.assertAlmostEqual(values[4], 0.0, delta=1e-3)  # guess 3

    def test_bad_programs(self):
        status, h = self.s.compile(b"ACCY\x01\x00\x00\x00garbage!!")
        self.assertEqual(status, INVALID_PROGRAM)
        self.assertEqual((h.index, h.generation), (77, 77))  # untouched on failure
        print("last cause:", self.s.last_cause())
        self.assertNotEqual(self.s.last_cause(), "")
        self.assertEqual(self.s.compile(b"")[0], INVALID_PROGRAM)
        self.assertEqual(self.s.compile(b"not a program")[0], INVALID_PROGRAM)

        future = bytearray(WIRE)
        future[4] = 9  # major version 9
        self.assertEqual(self.s.compile(bytes(future))[0], UNSUPPORTED_VERSION)
        print("last cause:", self.s.last_cause())
        self.assertIn("9.0", self.s.last_cause())

        for i in range(MAX_PROGRAMS):
            status, h = self.s.compile(WIRE)
            self.assertEqual(status, OK, i)
        self.assertEqual(self.s.compile(WIRE)[0], TOO_MANY_PROGRAMS)
        self.assertEqual(LIB.accy_release(self.s.ptr, h), OK)
        self.assertEqual(self.s.compile(WIRE)[0], OK)


def main():
    global LIB, WIRE, WIRE8
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    LIB = load(sys.argv[1])
    with open(sys.argv[2], "rb") as f:
        WIRE = f.read()
    with open(sys.argv[3], "rb") as f:
        WIRE8 = f.read()
    unittest.main(argv=[sys.argv[0], "-v"])


if __name__ == "__main__":
    main()
