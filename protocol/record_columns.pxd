# C types for the compiled build of record_columns.py (Cython's augmenting .pxd; the .py stays plain Python).
# The fields of a record are C long long (a value past 64 bits is OverflowError converting to one); _read_varint
# keeps Python ints so that it can tell a varint past 64 bits. The columns are typed views of their bytearrays.
import cython

@cython.locals(shift=cython.int)
cdef tuple _read_varint(const unsigned char[:] buf, Py_ssize_t pos)

cdef long long _checked_sum(long long a, long long b) except? -1

@cython.locals(data="const unsigned char[:]", pos=cython.Py_ssize_t, size=cython.Py_ssize_t,
               record_end=cython.Py_ssize_t, key_at=cython.Py_ssize_t, value_at=cython.Py_ssize_t,
               row=cython.Py_ssize_t, key_pos=cython.Py_ssize_t, value_pos=cython.Py_ssize_t,
               key_nulls=cython.Py_ssize_t, value_nulls=cython.Py_ssize_t, byte=cython.int, raw=cython.longlong,
               length=cython.longlong, timestamp_delta=cython.longlong, offset_delta=cython.longlong,
               key_length=cython.longlong, value_length=cython.longlong, offset=cython.longlong,
               timestamp=cython.longlong, base_offset=cython.longlong, base_timestamp=cython.longlong,
               max_timestamp=cython.longlong, log_append=cython.bint, timestamp_type=cython.int, epoch=cython.int,
               count=cython.longlong, _=cython.longlong)
cdef tuple _fill(list batches, long long start, long long end, list headers,
                 int[:] key_offsets, unsigned char[:] key_data, unsigned char[:] key_validity,
                 int[:] value_offsets, unsigned char[:] value_data, unsigned char[:] value_validity,
                 long long[:] offsets, long long[:] timestamps, int[:] timestamp_types, int[:] leader_epochs)

@cython.locals(count=cython.longlong, _=cython.longlong, key_length=cython.longlong, value_length=cython.longlong)
cdef Py_ssize_t _read_headers(const unsigned char[:] data, Py_ssize_t pos, Py_ssize_t record_end,
                              list found) except -1
