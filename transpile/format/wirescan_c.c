/* The reader's compiled fast path (optional): one BlockDesc's vars and ops read from its bytes.
 *
 * protoread.py reads a block by parsing its vars and ops with protobuf and taking what the
 * passes read (op type, slots, attr names, op_role and shape, var name, type and flags) field by
 * field through protobuf's Python objects: most of a split's reading time. This module walks the
 * same bytes once, in C, and gives protoread.py those values directly (and, through vars_of,
 * the block's Var objects themselves).
 *
 * It takes only what protobuf itself would write back byte for byte: each var and op must be
 * framework.proto's deterministic serialization (fields in number order, each singular field
 * once, shortest varints, repeated scalars unpacked, required fields present, known enum values,
 * text that is UTF-8, no unknown fields), checked against the schema wirescan.py hands to
 * configure() (built from transpile/format/proto.py's descriptors), and each op with a type
 * (an empty one is refused by protoread.py, which says where). On anything else block()
 * returns None and protoread.py reads the block as it always did, so the program read is the
 * same either way (tests/test_wirescan.py compares both on every corpus program and on
 * mutated bytes). Without a C compiler the module is not built and the pure-Python path runs.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

/* kinds of field, as configure() receives them */
enum { K_INT32 = 1, K_INT64 = 2, K_BOOL = 3, K_ENUM = 4, K_FLOAT = 5, K_DOUBLE = 6,
       K_STRING = 7, K_MESSAGE = 8 };

#define MAX_FIELD 64    /* field numbers of framework.proto stay below this */
#define MAX_DEPTH 16

typedef struct {
    int kind;
    int repeated;
    int required_bit;   /* -1, or the bit of this required field in the message's mask */
    int sub;            /* K_MESSAGE: index of its message */
    uint64_t enum_mask; /* K_ENUM: bit v set for each value v the enum defines */
} Field;

typedef struct {
    Field fields[MAX_FIELD];   /* by field number; kind 0: no such field */
    uint64_t required;         /* the mask with every required field's bit */
} Msg;

static Msg *msgs = NULL;
static Py_ssize_t n_msgs = 0;
static int op_msg = -1, var_msg = -1;

/* ------------------------------------------------------------------------------------------ */
/* wire primitives: NULL means "not as protobuf writes it" */

static inline const uint8_t *
rd_varint(const uint8_t *p, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;
    int i;
    for (i = 0; i < 10; i++) {
        uint8_t b;
        if (p >= end)
            return NULL;
        b = *p++;
        if (i == 9 && b > 1)
            return NULL;                        /* over 64 bits */
        v |= (uint64_t)(b & 0x7F) << (7 * i);
        if (!(b & 0x80)) {
            if (i > 0 && b == 0)
                return NULL;                    /* not the shortest form */
            *out = v;
            return p;
        }
    }
    return NULL;
}

static inline const uint8_t *
rd_len(const uint8_t *p, const uint8_t *end, const uint8_t **payload_end)
{
    uint64_t n;
    p = rd_varint(p, end, &n);
    if (p == NULL || n > (uint64_t)(end - p))
        return NULL;
    *payload_end = p + n;
    return p;
}

/* past the payload of a field whose key is `key` (its wire type): NULL for a group (never
   written by Paddle) or a payload running past the end */
static inline const uint8_t *
skip_payload(const uint8_t *p, const uint8_t *end, uint64_t key)
{
    const uint8_t *pay_end = NULL;
    uint64_t v;
    switch (key & 7) {
    case 0:
        return rd_varint(p, end, &v);
    case 1:
        return end - p >= 8 ? p + 8 : NULL;
    case 5:
        return end - p >= 4 ? p + 4 : NULL;
    case 2:
        return rd_len(p, end, &pay_end) ? pay_end : NULL;
    default:
        return NULL;
    }
}

/* strict UTF-8 (no overlong forms, no surrogates, nothing past U+10FFFF): what protobuf's
   proto3 parser accepts and what Python decodes */
static int
utf8_ok(const uint8_t *p, const uint8_t *end)
{
    while (p < end) {
        uint8_t c = *p;
        if (c < 0x80) {
            uint64_t w;
            p++;
            while (end - p >= 8) {              /* ASCII eight bytes at a time */
                memcpy(&w, p, 8);
                if (w & 0x8080808080808080u)
                    break;
                p += 8;
            }
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) {
            if (end - p < 2 || (p[1] & 0xC0) != 0x80)
                return 0;
            p += 2;
        }
        else if (c >= 0xE0 && c <= 0xEF) {
            uint8_t lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
            if (end - p < 3 || p[1] < lo || p[1] > hi || (p[2] & 0xC0) != 0x80)
                return 0;
            p += 3;
        }
        else if (c >= 0xF0 && c <= 0xF4) {
            uint8_t lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
            if (end - p < 4 || p[1] < lo || p[1] > hi || (p[2] & 0xC0) != 0x80
                    || (p[3] & 0xC0) != 0x80)
                return 0;
            p += 4;
        }
        else
            return 0;
    }
    return 1;
}

/* ------------------------------------------------------------------------------------------ */
/* is p..end message `mi` exactly as protobuf serializes it? */

static int
canonical(const uint8_t *p, const uint8_t *end, int mi, int depth)
{
    const Msg *m = &msgs[mi];
    uint64_t seen = 0, key, v;
    int last = 0;
    const uint8_t *stop;

    if (depth > MAX_DEPTH)
        return 0;
    while (p < end) {
        int number, wt;
        const Field *f;
        p = rd_varint(p, end, &key);
        if (p == NULL || key >= ((uint64_t)MAX_FIELD << 3))
            return 0;
        number = (int)(key >> 3);
        wt = (int)(key & 7);
        f = &m->fields[number];
        if (f->kind == 0 || number < last || (number == last && !f->repeated))
            return 0;
        last = number;
        switch (f->kind) {
        case K_INT32: case K_INT64: case K_BOOL: case K_ENUM:
            if (wt != 0 || (p = rd_varint(p, end, &v)) == NULL)
                return 0;
            if (f->kind == K_INT32 && v > 0x7FFFFFFFu && v < 0xFFFFFFFF80000000u)
                return 0;                       /* protobuf keeps the low 32 bits only */
            if (f->kind == K_BOOL && v > 1)
                return 0;
            if (f->kind == K_ENUM && (v >= 64 || !((f->enum_mask >> v) & 1)))
                return 0;                       /* an unknown value: kept as unknown field */
            break;
        case K_FLOAT:
            if (wt != 5 || end - p < 4)
                return 0;
            p += 4;
            break;
        case K_DOUBLE:
            if (wt != 1 || end - p < 8)
                return 0;
            p += 8;
            break;
        case K_STRING:
            if (wt != 2 || (p = rd_len(p, end, &stop)) == NULL || !utf8_ok(p, stop))
                return 0;
            p = stop;
            break;
        case K_MESSAGE:
            if (wt != 2 || (p = rd_len(p, end, &stop)) == NULL
                    || !canonical(p, stop, f->sub, depth + 1))
                return 0;
            p = stop;
            break;
        default:
            return 0;
        }
        if (f->required_bit >= 0)
            seen |= (uint64_t)1 << f->required_bit;
    }
    return seen == m->required;
}

/* ------------------------------------------------------------------------------------------ */
/* configure(messages, op_index, var_index): messages is a list, one entry per message type:
   a list of (number, kind, repeated, required, sub, enum_values) */

static PyObject *
configure(PyObject *self, PyObject *args)
{
    PyObject *spec, *seq = NULL;
    int op_i, var_i;
    Py_ssize_t i, j, n;
    Msg *table;

    (void)self;
    if (!PyArg_ParseTuple(args, "Oii", &spec, &op_i, &var_i))
        return NULL;
    seq = PySequence_Fast(spec, "configure: a list of messages");
    if (seq == NULL)
        return NULL;
    n = PySequence_Fast_GET_SIZE(seq);
    if (op_i < 0 || op_i >= n || var_i < 0 || var_i >= n) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "configure: message index out of range");
        return NULL;
    }
    table = PyMem_Calloc(n ? n : 1, sizeof(Msg));
    if (table == NULL) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (i = 0; i < n; i++) {
        PyObject *fields = PySequence_Fast(PySequence_Fast_GET_ITEM(seq, i),
                                           "configure: a list of fields");
        int nreq = 0;
        if (fields == NULL)
            goto fail;
        for (j = 0; j < PySequence_Fast_GET_SIZE(fields); j++) {
            int number, kind, repeated, required, sub;
            PyObject *values, *vseq;
            Field *f;
            Py_ssize_t k;
            if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fields, j), "iiiiiO", &number, &kind,
                                  &repeated, &required, &sub, &values)) {
                Py_DECREF(fields);
                goto fail;
            }
            if (number <= 0 || number >= MAX_FIELD || kind < K_INT32 || kind > K_MESSAGE
                    || (kind == K_MESSAGE && (sub < 0 || sub >= n)) || nreq >= 64) {
                Py_DECREF(fields);
                PyErr_Format(PyExc_ValueError, "configure: field %d not supported", number);
                goto fail;
            }
            f = &table[i].fields[number];
            f->kind = kind;
            f->repeated = repeated != 0;
            f->sub = sub;
            f->required_bit = -1;
            if (required) {
                f->required_bit = nreq;
                table[i].required |= (uint64_t)1 << nreq++;
            }
            vseq = PySequence_Fast(values, "configure: enum values");
            if (vseq == NULL) {
                Py_DECREF(fields);
                goto fail;
            }
            for (k = 0; k < PySequence_Fast_GET_SIZE(vseq); k++) {
                long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(vseq, k));
                if (v == -1 && PyErr_Occurred()) {
                    Py_DECREF(vseq);
                    Py_DECREF(fields);
                    goto fail;
                }
                if (v >= 0 && v < 64)   /* values past 63 are never accepted (read by protobuf) */
                    f->enum_mask |= (uint64_t)1 << v;
            }
            Py_DECREF(vseq);
        }
        Py_DECREF(fields);
    }
    Py_DECREF(seq);
    PyMem_Free(msgs);
    msgs = table;
    n_msgs = n;
    op_msg = op_i;
    var_msg = var_i;
    Py_RETURN_NONE;
fail:
    Py_DECREF(seq);
    PyMem_Free(table);
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* taking the values of a canonical var or op (checked first: no bound is checked again) */

/* The strings of one program, made once each: names repeat (an op's attr names, its slots,
   the vars it reads), and looking each one up in Python's table of interned strings costs more
   than the rest of the reading. ASCII strings only (all Paddle's names); forget() empties it
   (protoread.py, once a program is read). Each string is interned when first made. */
typedef struct {
    uint64_t hash;
    PyObject *str;
} Entry;

static Entry *table = NULL;
static size_t table_cap = 0, table_used = 0;

static void
forget_strings(void)
{
    size_t i;
    for (i = 0; i < table_cap; i++)
        Py_XDECREF(table[i].str);
    PyMem_Free(table);
    table = NULL;
    table_cap = table_used = 0;
}

static int
grow_table(void)
{
    size_t cap = table_cap ? table_cap * 2 : 4096, i, j;
    Entry *bigger = PyMem_Calloc(cap, sizeof(Entry));
    if (bigger == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (i = 0; i < table_cap; i++) {
        if (table[i].str == NULL)
            continue;
        for (j = table[i].hash & (cap - 1); bigger[j].str != NULL; j = (j + 1) & (cap - 1))
            ;
        bigger[j] = table[i];
    }
    PyMem_Free(table);
    table = bigger;
    table_cap = cap;
    return 0;
}

/* a hash of the bytes, and whether they are all ASCII */
static inline uint64_t
hash_bytes(const uint8_t *p, size_t n, int *ascii)
{
    uint64_t h = 0x9E3779B97F4A7C15u ^ n, w, high = 0;
    while (n >= 8) {
        memcpy(&w, p, 8);
        high |= w;
        h = (h ^ w) * 0xFF51AFD7ED558CCDu;
        h = (h << 31) | (h >> 33);
        p += 8;
        n -= 8;
    }
    w = 0;
    memcpy(&w, p, n);
    high |= w;
    h ^= w;                                     /* murmur3's finalizer */
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDu;
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53u;
    h ^= h >> 33;
    *ascii = !(high & 0x8080808080808080u);
    return h;
}

static PyObject *
interned(const uint8_t *p, const uint8_t *end)
{
    size_t n = end - p, i;
    int ascii;
    uint64_t h = hash_bytes(p, n, &ascii);
    PyObject *s;

    if (!ascii) {
        s = PyUnicode_DecodeUTF8((const char *)p, n, "strict");
        if (s != NULL)
            PyUnicode_InternInPlace(&s);
        return s;
    }
    if (table_used * 2 >= table_cap && grow_table() < 0)
        return NULL;
    for (i = h & (table_cap - 1); table[i].str != NULL; i = (i + 1) & (table_cap - 1)) {
        s = table[i].str;
        if (table[i].hash == h && (size_t)PyUnicode_GET_LENGTH(s) == n
                && memcmp(PyUnicode_DATA(s), p, n) == 0) {
            Py_INCREF(s);
            return s;
        }
    }
    s = PyUnicode_FromKindAndData(PyUnicode_1BYTE_KIND, p, n);
    if (s == NULL)
        return NULL;
    PyUnicode_InternInPlace(&s);
    Py_INCREF(s);
    table[i].hash = h;
    table[i].str = s;
    table_used++;
    return s;
}

static PyObject *
forget(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    forget_strings();
    Py_RETURN_NONE;
}

static inline const uint8_t *
next_field(const uint8_t *p, const uint8_t *end, int *number, int *wt,
           const uint8_t **pay, const uint8_t **pay_end, uint64_t *value)
{
    uint64_t key = 0;
    p = rd_varint(p, end, &key);
    *number = (int)(key >> 3);
    *wt = (int)(key & 7);
    switch (*wt) {
    case 0:
        return rd_varint(p, end, value);
    case 1:
        return p + 8;
    case 5:
        return p + 4;
    default:
        *pay = rd_len(p, end, pay_end);
        return *pay_end;
    }
}

/* OpDesc.Var: (slot name, [arguments]) into `slots`, and the same into `copy` (a list of its
   own) unless it is NULL; 1: the slot is there already */
static int
add_slot(PyObject *slots, PyObject *copy, const uint8_t *p, const uint8_t *end)
{
    PyObject *list2;
    PyObject *name = NULL, *list = PyList_New(0);
    int number, wt, rc = -1;
    const uint8_t *a = NULL, *b = NULL;
    uint64_t v;

    if (list == NULL)
        return -1;
    while (p < end) {
        p = next_field(p, end, &number, &wt, &a, &b, &v);
        if (number == 1) {
            Py_XDECREF(name);
            if ((name = interned(a, b)) == NULL)
                goto done;
        }
        else if (number == 2) {
            PyObject *arg = interned(a, b);
            if (arg == NULL || PyList_Append(list, arg) < 0) {
                Py_XDECREF(arg);
                goto done;
            }
            Py_DECREF(arg);
        }
    }
    rc = PyDict_Contains(slots, name);
    if (rc == 0 && copy == NULL) {
        if (PyDict_SetItem(slots, name, list) < 0)
            rc = -1;
    }
    else if (rc == 0) {
        list2 = PyList_GetSlice(list, 0, PyList_GET_SIZE(list));
        if (list2 == NULL || PyDict_SetItem(slots, name, list) < 0
                || PyDict_SetItem(copy, name, list2) < 0)
            rc = -1;
        Py_XDECREF(list2);
    }
done:
    Py_XDECREF(name);
    Py_DECREF(list);
    return rc;
}

static PyObject *
bool_or_none(int present, uint64_t v)
{
    PyObject *o = !present ? Py_None : v ? Py_True : Py_False;
    Py_INCREF(o);
    return o;
}

#define MAX_ATTRS 256
#define ATTR_BLOCK 8
#define ATTR_BLOCKS 10

/* the op's tuple (wire, type, inputs, outputs, the same inputs and outputs again (dicts and
   lists of their own, for the OpSource), is_target, attr names, op_role attr bytes or None,
   shape attr bytes or None, names of BLOCK / BLOCKS attrs); or its bytes alone when
   protoread.py is to read it (a slot or an attr name twice, very many attrs). `drop` (NUL
   terminated, or NULL): the name of an attr left out, of the names and of the wire (then the
   op's bytes without that attrs entry: still protobuf's serialization of what is left);
   `share`: the second inputs and outputs are the first ones, not copies. `base` (or NULL): the
   start of the bytes the op is read from, which the caller keeps (block()'s `placed`): the
   tuple's first item is then where the op's bytes are, (start, end) from `base`, or for an op
   with `drop`'s entry ((start, end), (a, b)) that entry's span from start; `wire` is then
   NULL, made here only for an op protoread.py is to read */
static PyObject *
take_op(PyObject *wire, const uint8_t *p, const uint8_t *end, const char *drop, int share,
        const uint8_t *base)
{
    const uint8_t *start = p, *cut_a = NULL, *cut_b = NULL;
    size_t drop_len = drop != NULL ? strlen(drop) : 0;
    PyObject *type = NULL, *ins = NULL, *outs = NULL, *names = NULL, *blocks = NULL;
    PyObject *ins2 = NULL, *outs2 = NULL;
    PyObject *role = Py_None, *shape = Py_None, *result = NULL;
    PyObject *attr_names[MAX_ATTRS];
    int is_block[MAX_ATTRS];
    Py_ssize_t n_attrs = 0, n_blocks = 0, i, j;
    int number, wt, has_target = 0, plain = 1, typeless = 0;
    uint64_t v = 0, target = 0;
    const uint8_t *a = NULL, *b = NULL;

    Py_INCREF(role);
    Py_INCREF(shape);
    if ((ins = PyDict_New()) == NULL || (outs = PyDict_New()) == NULL)
        goto done;
    if (!share && ((ins2 = PyDict_New()) == NULL || (outs2 = PyDict_New()) == NULL))
        goto done;
    while (p < end && plain && !typeless) {
        const uint8_t *field = p;
        p = next_field(p, end, &number, &wt, &a, &b, &v);
        switch (number) {
        case 1: case 2: {
            int rc = add_slot(number == 1 ? ins : outs, number == 1 ? ins2 : outs2, a, b);
            if (rc < 0)
                goto done;
            if (rc > 0)
                plain = 0;
            break;
        }
        case 3:
            Py_XDECREF(type);
            if ((type = interned(a, b)) == NULL)
                goto done;
            if (a == b)
                typeless = 1;                   /* an op without a type: not taken */
            break;
        case 4: {
            /* OpDesc.Attr: name = 1, type = 2 come first (canonical order) */
            const uint8_t *q = a, *na = NULL, *nb = NULL;
            int fn, fw;
            uint64_t atype = 0;
            PyObject *name;
            if (n_attrs == MAX_ATTRS) {
                plain = 0;
                break;
            }
            while (q < b) {
                const uint8_t *x = NULL, *y = NULL;
                uint64_t w = 0;
                q = next_field(q, b, &fn, &fw, &x, &y, &w);
                if (fn == 1) {
                    na = x;
                    nb = y;
                }
                else if (fn == 2)
                    atype = w;
                if (fn >= 2)
                    break;
            }
            if (drop != NULL && (size_t)(nb - na) == drop_len && memcmp(na, drop, drop_len) == 0) {
                if (cut_a != NULL)
                    plain = 0;                  /* twice: protoread.py drops them */
                cut_a = field;
                cut_b = p;
                break;
            }
            if ((name = interned(na, nb)) == NULL)
                goto done;
            for (i = 0; i < n_attrs; i++)
                if (attr_names[i] == name)
                    plain = 0;                  /* an attr name twice */
            attr_names[n_attrs] = name;
            is_block[n_attrs] = atype == ATTR_BLOCK || atype == ATTR_BLOCKS;
            n_blocks += is_block[n_attrs];
            n_attrs++;
            if (nb - na == 7 && memcmp(na, "op_role", 7) == 0) {
                Py_SETREF(role, PyBytes_FromStringAndSize((const char *)a, b - a));
                if (role == NULL)
                    goto done;
            }
            else if (nb - na == 5 && memcmp(na, "shape", 5) == 0) {
                Py_SETREF(shape, PyBytes_FromStringAndSize((const char *)a, b - a));
                if (shape == NULL)
                    goto done;
            }
            break;
        }
        case 5:
            has_target = 1;
            target = v;
            break;
        }
    }
    if (typeless) {                             /* block() takes no block holding it */
        Py_INCREF(Py_None);
        result = Py_None;
        goto done;
    }
    if (!plain) {
        if (wire == NULL)
            result = PyBytes_FromStringAndSize((const char *)start, end - start);
        else {
            Py_INCREF(wire);
            result = wire;
        }
        goto done;
    }
    if ((names = PyTuple_New(n_attrs)) == NULL || (blocks = PyTuple_New(n_blocks)) == NULL)
        goto done;
    for (i = j = 0; i < n_attrs; i++) {
        Py_INCREF(attr_names[i]);
        PyTuple_SET_ITEM(names, i, attr_names[i]);
        if (is_block[i]) {
            Py_INCREF(attr_names[i]);
            PyTuple_SET_ITEM(blocks, j++, attr_names[i]);
        }
    }
    if (base != NULL) {
        Py_ssize_t from = start - base, to = end - base;
        PyObject *at = cut_a != NULL
            ? Py_BuildValue("((nn)(nn))", from, to, (Py_ssize_t)(cut_a - start),
                            (Py_ssize_t)(cut_b - start))
            : Py_BuildValue("(nn)", from, to);
        if (at == NULL)
            goto done;
        result = Py_BuildValue("(NOOOOONOOOO)", at, type, ins, outs, share ? ins : ins2,
                               share ? outs : outs2, bool_or_none(has_target, target), names,
                               role, shape, blocks);
    }
    else if (cut_a != NULL) {
        PyObject *cut = PyBytes_FromStringAndSize(NULL, (end - start) - (cut_b - cut_a));
        if (cut == NULL)
            goto done;
        memcpy(PyBytes_AS_STRING(cut), start, cut_a - start);
        memcpy(PyBytes_AS_STRING(cut) + (cut_a - start), cut_b, end - cut_b);
        result = Py_BuildValue("(NOOOOONOOOO)", cut, type, ins, outs, share ? ins : ins2,
                               share ? outs : outs2, bool_or_none(has_target, target), names,
                               role, shape, blocks);
    }
    else
        result = Py_BuildValue("(OOOOOONOOOO)", wire, type, ins, outs, share ? ins : ins2,
                               share ? outs : outs2, bool_or_none(has_target, target), names,
                               role, shape, blocks);
done:
    for (i = 0; i < n_attrs; i++)
        Py_DECREF(attr_names[i]);
    Py_XDECREF(type);
    Py_XDECREF(ins);
    Py_XDECREF(outs);
    Py_XDECREF(ins2);
    Py_XDECREF(outs2);
    Py_XDECREF(names);
    Py_XDECREF(blocks);
    Py_DECREF(role);
    Py_DECREF(shape);
    return result;
}

/* the var's tuple (wire, name, VarType bytes, persistable, need_check_feed, is_parameter,
   stop_gradient), each flag None when absent, the wire None when `wire` is NULL (a program
   only read: no var keeps its bytes); or its bytes alone when it has attrs (made here when
   `wire` is NULL) */
static PyObject *
take_var(PyObject *wire, const uint8_t *p, const uint8_t *end)
{
    const uint8_t *start = p;
    PyObject *name = NULL, *type = NULL, *flags[4], *result = NULL;
    int number, wt, i, present[4] = {0, 0, 0, 0};
    uint64_t v = 0, value[4] = {0, 0, 0, 0};
    const uint8_t *a = NULL, *b = NULL;

    while (p < end) {
        p = next_field(p, end, &number, &wt, &a, &b, &v);
        if (number == 1) {
            Py_XDECREF(name);
            if ((name = interned(a, b)) == NULL)
                goto done;
        }
        else if (number == 2) {
            Py_XDECREF(type);
            if ((type = PyBytes_FromStringAndSize((const char *)a, b - a)) == NULL)
                goto done;
        }
        else if (number >= 3 && number <= 6) {
            present[number - 3] = 1;
            value[number - 3] = v;
        }
        else {                                  /* attrs = 7 */
            Py_XINCREF(wire);
            result = wire != NULL ? wire
                                  : PyBytes_FromStringAndSize((const char *)start, end - start);
            goto done;
        }
    }
    for (i = 0; i < 4; i++)
        flags[i] = bool_or_none(present[i], value[i]);
    result = Py_BuildValue("(OOONNNN)", wire != NULL ? wire : Py_None, name, type, flags[0],
                           flags[1], flags[2], flags[3]);
done:
    Py_XDECREF(name);
    Py_XDECREF(type);
    return result;
}

/* ------------------------------------------------------------------------------------------ */
/* block(data, start, end[, drop[, share[, limit[, placed]]]]) -> (other fields' bytes, [var],
   [op]) or None; `drop`: the name of an attr left out of every op, or None; `share`: true for
   a program only read (ops whose slots are not copied for their OpSource, vars without their
   bytes: take_op, take_var); `limit` > 0: the fields from `start` up to the first field
   that begins `limit` bytes or more after it, a window of the block (read window after
   window, the items of one taken before the next are made), and where that field begins
   is a fourth item of the tuple; `placed`: true where the caller keeps `data` (a file's
   bytes): each op tuple says where the op's bytes are in `data` instead of holding a copy of
   them (take_op's `base`) */

#define KEY_VARS 0x1A
#define KEY_OPS 0x22

static PyObject *
block(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    Py_ssize_t start, end, limit = 0;
    PyObject *vars = NULL, *ops = NULL, *rest = NULL, *result = NULL;
    const uint8_t *p, *stop, *base, *window = NULL;
    const char *drop = NULL;
    int ok = 1, share = 0, placed = 0;

    (void)self;
    if (msgs == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "wirescan_c: configure() first");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "y*nn|zpnp", &buf, &start, &end, &drop, &share, &limit,
                          &placed))
        return NULL;
    if (start < 0 || end > buf.len || start > end) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "block: bounds outside the data");
        return NULL;
    }
    base = (const uint8_t *)buf.buf;
    p = base + start;
    stop = base + end;
    if (limit > 0 && limit < end - start)
        window = p + limit;
    if ((vars = PyList_New(0)) == NULL || (ops = PyList_New(0)) == NULL
            || (rest = PyByteArray_FromStringAndSize(NULL, 0)) == NULL)
        goto done;
    while (p < stop && ok && (window == NULL || p < window)) {
        const uint8_t *field = p, *pay, *pay_end;
        uint64_t key;
        p = rd_varint(p, stop, &key);
        if (p == NULL) {
            ok = 0;
            break;
        }
        if (key == KEY_VARS || key == KEY_OPS) {
            PyObject *wire, *item;
            int is_op = key == KEY_OPS;
            if ((pay = rd_len(p, stop, &pay_end)) == NULL
                    || !canonical(pay, pay_end, is_op ? op_msg : var_msg, 0)) {
                ok = 0;
                break;
            }
            wire = NULL;            /* a var of a program only read keeps no bytes */
            if (((is_op && !placed) || (!is_op && !share))
                    && (wire = PyBytes_FromStringAndSize((const char *)pay, pay_end - pay)) == NULL)
                goto done;
            item = is_op ? take_op(wire, pay, pay_end, drop, share, placed ? base : NULL)
                         : take_var(wire, pay, pay_end);
            Py_XDECREF(wire);
            if (item == Py_None) {              /* an op without a type */
                Py_DECREF(item);
                ok = 0;
                break;
            }
            if (item == NULL || PyList_Append(is_op ? ops : vars, item) < 0) {
                Py_XDECREF(item);
                goto done;
            }
            Py_DECREF(item);
            p = pay_end;
            continue;
        }
        p = skip_payload(p, stop, key);         /* another field of the block: kept as is */
        if (p == NULL) {
            ok = 0;
            break;
        }
        {
            Py_ssize_t have = PyByteArray_GET_SIZE(rest);
            if (PyByteArray_Resize(rest, have + (p - field)) < 0)
                goto done;
            memcpy(PyByteArray_AS_STRING(rest) + have, field, p - field);
        }
    }
    if (!ok) {
        Py_INCREF(Py_None);
        result = Py_None;
    }
    else {
        PyObject *rest_bytes = PyBytes_FromStringAndSize(PyByteArray_AS_STRING(rest),
                                                         PyByteArray_GET_SIZE(rest));
        if (rest_bytes != NULL && limit > 0)
            result = Py_BuildValue("(NOOn)", rest_bytes, vars, ops, (Py_ssize_t)(p - base));
        else if (rest_bytes != NULL)
            result = Py_BuildValue("(NOO)", rest_bytes, vars, ops);
    }
done:
    Py_XDECREF(vars);
    Py_XDECREF(ops);
    Py_XDECREF(rest);
    PyBuffer_Release(&buf);
    return result;
}

/* ------------------------------------------------------------------------------------------ */
/* vars_of(items, types, typed_of, var_of, Var, VarSource) -> {name: Var}: the Vars of block()'s
   var items, in their order, made as protoread.py's _decode_scanned makes them (each with its
   VarSource: the item's bytes and key (name, flags, (), the VarType's key); VarSource None:
   no source). `types` maps a VarType's bytes to (VarType, its key), typed_of(bytes) makes
   (and keeps) one it lacks;
   var_of(bytes) makes the Var of an item read by protobuf (a var with attrs). None when a name
   comes twice: protoread.py reads the block again and says so. The objects are made without
   running their __init__ (every slot set here) */

static PyObject *VAR_SLOTS[8], *SOURCE_SLOTS[2];

static int
slot_names(void)
{
    static const char *var_slots[8] = {"name", "type", "persistable", "need_check_feed",
                                       "is_parameter", "stop_gradient", "attrs", "source"};
    static const char *source_slots[2] = {"wire", "key"};
    int i;
    if (VAR_SLOTS[0] != NULL)
        return 0;
    for (i = 0; i < 8; i++)
        if ((VAR_SLOTS[i] = PyUnicode_InternFromString(var_slots[i])) == NULL)
            return -1;
    for (i = 0; i < 2; i++)
        if ((SOURCE_SLOTS[i] = PyUnicode_InternFromString(source_slots[i])) == NULL)
            return -1;
    return 0;
}

/* where each of `n` slots of `cls` named `slots` is in its instances (a member descriptor's
   offset of an object slot), or -1 with an exception when one is not such a slot */
static int
slot_offsets(PyObject *cls, PyObject **slots, Py_ssize_t *offsets, int n)
{
    int i;
    for (i = 0; i < n; i++) {
        PyObject *d = PyObject_GetAttr(cls, slots[i]);
        if (d == NULL)
            return -1;
        if (!Py_IS_TYPE(d, &PyMemberDescr_Type)
                || ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX) {
            Py_DECREF(d);
            PyErr_Format(PyExc_TypeError, "vars_of: %R is not an object slot", slots[i]);
            return -1;
        }
        offsets[i] = ((PyMemberDescrObject *)d)->d_member->offset;
        Py_DECREF(d);
    }
    return 0;
}

/* a new instance of `cls` (not initialised) whose slots at `offsets` are `values` (new
   references, taken), or NULL */
static PyObject *
made(PyTypeObject *cls, const Py_ssize_t *offsets, PyObject **values, int n)
{
    PyObject *obj = cls->tp_alloc(cls, 0);
    int i;
    for (i = 0; i < n; i++) {
        if (obj == NULL)
            Py_DECREF(values[i]);
        else
            *(PyObject **)((char *)obj + offsets[i]) = values[i];
    }
    return obj;
}

static PyObject *
vars_of(PyObject *self, PyObject *args)
{
    PyObject *items, *types, *typed_of, *var_of, *var_cls, *src_cls, *out = NULL, *empty;
    Py_ssize_t i, n, var_at[8], src_at[2];

    (void)self;
    if (!PyArg_ParseTuple(args, "O!O!OOO!O", &PyList_Type, &items, &PyDict_Type, &types,
                          &typed_of, &var_of, &PyType_Type, &var_cls, &src_cls))
        return NULL;
    if (src_cls != Py_None && !PyType_Check(src_cls)) {
        PyErr_SetString(PyExc_TypeError, "vars_of: VarSource is a class or None");
        return NULL;
    }
    if (slot_names() < 0 || slot_offsets(var_cls, VAR_SLOTS, var_at, 8) < 0
            || (src_cls != Py_None && slot_offsets(src_cls, SOURCE_SLOTS, src_at, 2) < 0)
            || (empty = PyTuple_New(0)) == NULL)
        return NULL;
    if ((out = PyDict_New()) == NULL)
        goto fail;
    n = PyList_GET_SIZE(items);
    for (i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(items, i), *var, *name;
        int dup;
        if (PyTuple_CheckExact(item) && PyTuple_GET_SIZE(item) == 7) {
            PyObject *raw = PyTuple_GET_ITEM(item, 2), *typed, *key, *src, *values[8];
            int j;
            name = PyTuple_GET_ITEM(item, 1);
            typed = PyDict_GetItemWithError(types, raw);
            if (typed != NULL)
                Py_INCREF(typed);
            else if (PyErr_Occurred() || (typed = PyObject_CallOneArg(typed_of, raw)) == NULL)
                goto fail;
            if (!PyTuple_CheckExact(typed) || PyTuple_GET_SIZE(typed) != 2) {
                Py_DECREF(typed);
                PyErr_SetString(PyExc_TypeError, "vars_of: a VarType is (VarType, key)");
                goto fail;
            }
            if (src_cls == Py_None) {
                Py_INCREF(Py_None);
                src = Py_None;
            }
            else {
                key = PyTuple_Pack(7, name, PyTuple_GET_ITEM(item, 3), PyTuple_GET_ITEM(item, 4),
                                   PyTuple_GET_ITEM(item, 5), PyTuple_GET_ITEM(item, 6), empty,
                                   PyTuple_GET_ITEM(typed, 1));
                if (key == NULL) {
                    Py_DECREF(typed);
                    goto fail;
                }
                Py_INCREF(PyTuple_GET_ITEM(item, 0));
                values[0] = PyTuple_GET_ITEM(item, 0);
                values[1] = key;
                if ((src = made((PyTypeObject *)src_cls, src_at, values, 2)) == NULL) {
                    Py_DECREF(typed);
                    goto fail;
                }
            }
            values[0] = name;
            values[1] = PyTuple_GET_ITEM(typed, 0);
            for (j = 2; j < 6; j++)
                values[j] = PyTuple_GET_ITEM(item, j + 1);
            values[6] = empty;
            for (j = 0; j < 7; j++)
                Py_INCREF(values[j]);
            values[7] = src;
            var = made((PyTypeObject *)var_cls, var_at, values, 8);
            Py_DECREF(typed);
            if (var == NULL)
                goto fail;
        }
        else {
            if ((var = PyObject_CallOneArg(var_of, item)) == NULL)
                goto fail;
            name = PyObject_GetAttr(var, VAR_SLOTS[0]);
            if (name == NULL) {
                Py_DECREF(var);
                goto fail;
            }
            Py_DECREF(name);            /* the var holds it */
        }
        dup = PyDict_Contains(out, name);
        if (dup != 0 || PyDict_SetItem(out, name, var) < 0) {
            Py_DECREF(var);
            if (dup == 1) {             /* declared twice: read again, and said, by Python */
                Py_DECREF(out);
                Py_DECREF(empty);
                Py_RETURN_NONE;
            }
            goto fail;
        }
        Py_DECREF(var);
    }
    Py_DECREF(empty);
    return out;
fail:
    Py_XDECREF(out);
    Py_DECREF(empty);
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* spans(data, key) -> ((start, end), ...) of the fields with that key (key and length included)
   of the message data, in order; None where data is not as protobuf writes it (a varint not in
   its shortest form, a group, a field running past the end): opsource.py then walks it */

static PyObject *
spans(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    unsigned long long want;
    PyObject *found = NULL, *result = NULL;
    const uint8_t *base, *p, *end;

    (void)self;
    if (!PyArg_ParseTuple(args, "y*K", &buf, &want))
        return NULL;
    base = p = (const uint8_t *)buf.buf;
    end = base + buf.len;
    if ((found = PyList_New(0)) == NULL)
        goto done;
    while (p < end) {
        const uint8_t *at = p;
        uint64_t key;
        p = rd_varint(p, end, &key);
        if (p == NULL || (p = skip_payload(p, end, key)) == NULL)
            break;
        if (key == want) {
            PyObject *span = Py_BuildValue("(nn)", (Py_ssize_t)(at - base),
                                           (Py_ssize_t)(p - base));
            if (span == NULL || PyList_Append(found, span) < 0) {
                Py_XDECREF(span);
                goto done;
            }
            Py_DECREF(span);
        }
    }
    if (p == NULL) {
        Py_INCREF(Py_None);
        result = Py_None;
    }
    else
        result = PyList_AsTuple(found);
done:
    Py_XDECREF(found);
    PyBuffer_Release(&buf);
    return result;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(messages, op_index, var_index): the schema canonical bytes are checked against"},
    {"block", block, METH_VARARGS,
     "block(data, start, end[, drop[, share[, limit[, placed]]]]) -> (other fields' bytes, "
     "[var], [op][, where the window ends]), or None when a var or op is not protobuf's own "
     "serialization (read by protoread.py instead); drop: the name of an attr left out of "
     "every op; share: an op's slots not copied; limit: a window of the block, up to the first "
     "field beginning limit bytes or more after start; placed: each op's place in data, not "
     "its bytes"},
    {"spans", spans, METH_VARARGS,
     "spans(data, key) -> ((start, end), ...) of the fields with that key, or None when the "
     "bytes are not protobuf's own serialization (walked by opsource.py instead)"},
    {"vars_of", vars_of, METH_VARARGS,
     "vars_of(items, types, typed_of, var_of, Var, VarSource or None) -> {name: Var} of "
     "block()'s var items, or None when a name comes twice"},
    {"forget", forget, METH_NOARGS,
     "forget(): let go of the strings block() made (once a program is read)"},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "wirescan_c",
    "The reader's compiled fast path: a BlockDesc's vars and ops read from their bytes.",
    -1, methods, NULL, NULL, NULL, NULL
};

PyMODINIT_FUNC
PyInit_wirescan_c(void)
{
    /* INTERFACE: what wirescan.py's compiled() expects of this build (3: block()'s `limit`,
       a window of the block, and `placed`); a module built from an older source is not used */
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "INTERFACE", 3) < 0)
        Py_CLEAR(m);
    return m;
}
