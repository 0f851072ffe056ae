// The prover's vocabulary (sorts and function symbols) and its axioms.
//
// Soundness argument (configs/rules/AXIOMS.md has the long form). Tensors are values with a shape;
// every axiom is an identity that holds, in real arithmetic, for all well-formed instances that
// satisfy its guard. The solver instantiates an axiom only where its pattern matches a term that
// already exists, and the guards are written so that the terms an instance creates are
// well-formed whenever the matched terms are (the rule's own source and target are well-formed:
// the matcher found the source in a valid graph and the applier type-checks the target). Shape
// axioms define shape(t) of every operator's output as a total function of its inputs' shapes.
// Integer lists (strides, pads, perms, shapes, split sizes) are the datatype L, so list literals
// compare by value.
#include <string>
#include <vector>

#include "prover_internal.h"
#include "rlflow/rules/prover.h"

namespace rlflow::rules::prover {

namespace {

struct FnSpec {
  const char* name;
  const char* domain;  // one letter per argument: T tensor, L list, I int, R real
  char range;
};

// Every uninterpreted function. Tensor operators mirror ir::OpKind (Conv without bias and
// activation; BiasAdd, ChMul and Act express the rest of ONNX Conv and BatchNorm).
const FnSpec kFunctions[] = {
    {"Conv", "TTLLLI", 'T'},      // conv(x, w, strides, pads, dilations, group)
    {"BiasAdd", "TT", 'T'},       // y + b[c] on axis 1 (b has shape [C])
    {"ChMul", "TT", 'T'},         // y * k[c] on axis 1 (k has shape [C])
    {"Act", "IT", 'T'},           // Conv's fused activation code applied to a tensor
    {"Relu", "T", 'T'},
    {"Sigmoid", "T", 'T'},
    {"Tanh", "T", 'T'},
    {"Erf", "T", 'T'},
    {"Sqrt", "T", 'T'},
    {"GAP", "T", 'T'},            // GlobalAveragePool
    {"Clip", "TRR", 'T'},
    {"SMul", "TR", 'T'},          // ScalarMul
    {"SVal", "T", 'R'},           // the value of a rank-0 tensor
    {"Cast", "TI", 'T'},
    {"Add", "TT", 'T'},
    {"Sub", "TT", 'T'},
    {"Mul", "TT", 'T'},
    {"Div", "TT", 'T'},
    {"Pow", "TT", 'T'},
    {"MatMul", "TT", 'T'},
    {"Concat", "TTI", 'T'},       // two inputs; n-ary Concat nests to the left
    {"Split", "TILI", 'T'},       // split(x, axis, sizes, k): output k
    {"Transpose", "TL", 'T'},
    {"Reshape", "TL", 'T'},
    {"Flatten", "TI", 'T'},
    {"Enlarge", "TL", 'T'},
    {"Const", "ILIR", 'T'},       // Constant(fill, shape, dtype, value)
    {"BatchNorm", "TTTTTR", 'T'}, // (x, scale, bias, mean, var, epsilon)
    {"Softmax", "TI", 'T'},
    {"LayerNorm", "TTIR", 'T'},
    {"LayerNorm3", "TTTIR", 'T'},
    {"ReduceMean", "TLI", 'T'},
    {"MaxPool", "TLLLII", 'T'},   // (x, kernel, strides, pads, ceil_mode, count_include_pad)
    {"AvgPool", "TLLLII", 'T'},
    {"Pad", "TLIR", 'T'},
    {"Slice", "TLLLL", 'T'},
    {"Gather", "TTI", 'T'},
    {"Squeeze", "TL", 'T'},
    {"Unsqueeze", "TL", 'T'},
    // shapes and lists
    {"shape", "T", 'L'},
    {"len", "L", 'I'},
    {"nth", "LI", 'I'},
    {"permute", "LL", 'L'},       // permute(v, p)[i] = v[p[i]]
    {"iota", "I", 'L'},
    {"ones", "I", 'L'},
    {"zeros", "I", 'L'},
    {"lsum", "L", 'I'},
    {"lset", "LII", 'L'},         // the list with element i replaced
    {"lappend", "LL", 'L'},
    {"lindex", "LI", 'I'},        // position of a value in a list
    {"bshape", "LL", 'L'},        // numpy broadcast of two shapes
    {"convout", "IIIIII", 'I'},   // output extent of a sliding window
};

// Shared macros. rank and dim are not symbols of their own: every shape fact goes through
// shape(t), so equal tensors have equal ranks and dims by congruence.
const char* kPreamble = R"(
(define-fun rank ((x T)) Int (len (shape x)))
(define-fun dim ((x T) (i Int)) Int (nth (shape x) i))
(define-fun l1 ((a Int)) L (cons a nil))
(define-fun l2 ((a Int) (b Int)) L (cons a (cons b nil)))
(define-fun l4 ((a Int) (b Int) (c Int) (d Int)) L (cons a (cons b (cons c (cons d nil)))))
(define-fun imax ((a Int) (b Int)) Int (ite (>= a b) a b))
(define-fun swap2 ((l L)) L (l2 (nth l 1) (nth l 0)))
(define-fun swap4 ((l L)) L (l4 (nth l 1) (nth l 0) (nth l 3) (nth l 2)))
(define-fun hwperm ((q L)) Bool (= q (l4 0 1 3 2)))
(define-fun perchannel ((b T) (x T)) Bool (= (shape b) (cons (dim x 1) (ones (- (rank x) 2)))))
(define-fun flat_on ((b T) (a T) (ax Int)) Bool (and (>= (rank a) (rank b)) (<= 0 ax) (or (< ax (- (rank a) (rank b))) (= (dim b (- ax (- (rank a) (rank b)))) 1))))
(define-fun hwflat ((b T)) Bool (or (= (rank b) 0) (and (= (rank b) 1) (= (dim b 0) 1)) (and (>= (rank b) 2) (<= (rank b) 4) (= (dim b (- (rank b) 1)) 1) (= (dim b (- (rank b) 2)) 1))))
)";

struct Ax {
  std::string name, group, smt, why;
};

std::string forall(const std::string& binders, const std::string& body, const std::vector<std::string>& patterns) {
  std::string s = "(assert (forall (" + binders + ") (! " + body;
  for (const auto& p : patterns) s += " :pattern (" + p + ")";
  return s + ")))";
}

std::string ground_lists(const char* fn, int value_of_index /* -1: i itself */, int upto) {
  std::string s = "(assert (and";
  for (int n = 0; n <= upto; ++n) {
    std::string l = "nil";
    for (int i = n - 1; i >= 0; --i) l = "(cons " + std::to_string(value_of_index < 0 ? i : value_of_index) + " " + l + ")";
    s += " (= (" + std::string(fn) + " " + std::to_string(n) + ") " + l + ")";
  }
  return s + "))";
}

// Element-wise unary operators: (name, extra binders, application to X).
struct Unary {
  const char* name;
  const char* binders;
  const char* apply;  // with X for the tensor argument
};
const Unary kUnary[] = {
    {"Relu", "", "(Relu X)"},
    {"Sigmoid", "", "(Sigmoid X)"},
    {"Tanh", "", "(Tanh X)"},
    {"Erf", "", "(Erf X)"},
    {"Sqrt", "", "(Sqrt X)"},
    {"SMul", " (u Real)", "(SMul X u)"},
    {"Clip", " (lo Real) (hi Real)", "(Clip X lo hi)"},
    {"Act", " (k Int)", "(Act k X)"},
};

std::string with(const char* pattern, const std::string& x) {
  std::string s = pattern;
  auto at = s.find('X');
  return s.replace(at, 1, x);
}

std::vector<Ax> build_axioms() {
  std::vector<Ax> ax;
  auto add = [&](std::string name, std::string group, std::string smt, std::string why) {
    // Name the quantifier after the axiom (Z3's instantiation statistics report it).
    auto at = smt.find(" :pattern");
    if (at != std::string::npos) smt.insert(at, " :qid " + name);
    ax.push_back({std::move(name), std::move(group), std::move(smt), std::move(why)});
  };

  // ---- encoding: how ONNX operators map onto the symbols ----
  const char* acts[] = {"y", "(Relu y)", "(Sigmoid y)", "(Tanh y)"};
  const char* act_names[] = {"none", "relu", "sigmoid", "tanh"};
  for (int k = 0; k < 4; ++k)
    add(std::string("act_") + act_names[k], "encoding",
        forall("(y T) (a Int)", "(=> (= a " + std::to_string(k) + ") (= (Act a y) " + acts[k] + "))", {"(Act a y)"}),
        std::string("Conv's fused activation code ") + std::to_string(k) + " (ir::Activation) is " + act_names[k] + " applied after the convolution.");
  add("sub_def", "encoding", forall("(x T) (y T)", "(= (Sub x y) (Add x (SMul y (- 1.0))))", {"(Sub x y)"}),
      "x - y = x + (-1)y element-wise; SMul keeps y's shape, so both sides broadcast alike.");

  // ---- lists: definitions of the list functions used by shapes and rule expressions ----
  add("len_nil", "lists", "(assert (= (len nil) 0))", "Definition of len.");
  add("len_cons", "lists", forall("(h Int) (t L)", "(= (len (cons h t)) (+ 1 (len t)))", {"(len (cons h t))"}), "Definition of len.");
  add("len_nonneg", "lists", forall("(l L)", "(>= (len l) 0)", {"(len l)"}), "Follows from the definition of len (induction).");
  add("nth_cons", "lists", forall("(h Int) (t L) (i Int)", "(= (nth (cons h t) i) (ite (= i 0) h (nth t (- i 1))))", {"(nth (cons h t) i)"}),
      "Definition of nth by recursion on the list (nth of nil is left free).");
  add("permute_nil", "lists", forall("(v L)", "(= (permute v nil) nil)", {"(permute v nil)"}), "Definition of permute (permute(v, p)[i] = v[p[i]]).");
  add("permute_cons", "lists", forall("(v L) (i Int) (t L)", "(= (permute v (cons i t)) (cons (nth v i) (permute v t)))", {"(permute v (cons i t))"}),
      "Definition of permute.");
  add("permute_len", "lists", forall("(v L) (p L)", "(= (len (permute v p)) (len p))", {"(permute v p)"}), "Follows from the definition of permute.");
  add("permute_nth", "lists", forall("(v L) (p L) (i Int)", "(=> (and (<= 0 i) (< i (len p))) (= (nth (permute v p) i) (nth v (nth p i))))", {"(nth (permute v p) i)"}),
      "Follows from the definition of permute (for indices in range only).");
  add("iota_small", "lists", ground_lists("iota", -1, 8), "iota(n) = [0, 1, ..., n-1], spelled out for n <= 8 (ground facts).");
  add("iota_len", "lists", forall("(n Int)", "(=> (>= n 0) (= (len (iota n)) n))", {"(iota n)"}), "Definition of iota.");
  add("iota_nth", "lists", forall("(n Int) (i Int)", "(=> (and (<= 0 i) (< i n)) (= (nth (iota n) i) i))", {"(nth (iota n) i)"}), "Definition of iota.");
  add("ones_small", "lists", ground_lists("ones", 1, 8), "ones(n) = [1, ..., 1] (n entries), spelled out for n <= 8.");
  add("zeros_small", "lists", ground_lists("zeros", 0, 8), "zeros(n) = [0, ..., 0] (n entries), spelled out for n <= 8.");
  add("lsum_nil", "lists", "(assert (= (lsum nil) 0))", "Definition of the sum of a list.");
  add("lsum_cons", "lists", forall("(h Int) (t L)", "(= (lsum (cons h t)) (+ h (lsum t)))", {"(lsum (cons h t))"}), "Definition of the sum of a list.");
  add("lset_len", "lists", forall("(l L) (i Int) (v Int)", "(= (len (lset l i v)) (len l))", {"(lset l i v)"}), "lset(l, i, v) is l with entry i replaced by v.");
  add("lset_nth", "lists", forall("(l L) (i Int) (v Int) (j Int)", "(=> (and (<= 0 j) (< j (len l))) (= (nth (lset l i v) j) (ite (= j i) v (nth l j))))", {"(nth (lset l i v) j)"}),
      "lset(l, i, v) is l with entry i replaced by v (indices in range only).");
  add("lappend_cons", "lists", forall("(h Int) (t L) (m L)", "(= (lappend (cons h t) m) (cons h (lappend t m)))", {"(lappend (cons h t) m)"}),
      "Definition of list concatenation.");
  add("lappend_nil", "lists", forall("(m L)", "(= (lappend nil m) m)", {"(lappend nil m)"}), "Definition of list concatenation.");
  add("lindex_cons", "lists", forall("(h Int) (t L) (v Int)", "(= (lindex (cons h t) v) (ite (= h v) 0 (+ 1 (lindex t v))))", {"(lindex (cons h t) v)"}),
      "Definition of the position of a value in a list.");
  add("bshape_len", "lists", forall("(p L) (q L)", "(= (len (bshape p q)) (imax (len p) (len q)))", {"(bshape p q)"}),
      "Numpy broadcasting: the result has the larger rank.");
  add("bshape_nth", "lists",
      forall("(p L) (q L) (i Int)",
             "(let ((r (imax (len p) (len q)))) (=> (and (<= 0 i) (< i r)) (let ((a (ite (< i (- r (len p))) 1 (nth p (- i (- r (len p)))))) (b (ite (< i (- r (len q))) 1 (nth q (- i (- r (len q))))))) (= (nth (bshape p q) i) (ite (= a 1) b a)))))",
             {"(nth (bshape p q) i)"}),
      "Numpy broadcasting aligns trailing dims; a dim of 1 (or a missing one) takes the other's extent. Right whenever the shapes broadcast.");

  // ---- shapes: the output shape of each operator (total definitions) ----
  add("dims_nonneg", "shapes", forall("(t T) (i Int)", "(=> (and (<= 0 i) (< i (rank t))) (>= (dim t i) 0))", {"(dim t i)"}), "Extents are never negative.");
  struct SameShape {
    const char* name;
    const char* binders;
    const char* term;
  };
  const SameShape same[] = {
      {"Relu", "(x T)", "(Relu x)"}, {"Sigmoid", "(x T)", "(Sigmoid x)"}, {"Tanh", "(x T)", "(Tanh x)"},
      {"Erf", "(x T)", "(Erf x)"}, {"Sqrt", "(x T)", "(Sqrt x)"}, {"Clip", "(x T) (a Real) (b Real)", "(Clip x a b)"},
      {"SMul", "(x T) (a Real)", "(SMul x a)"}, {"Cast", "(x T) (d Int)", "(Cast x d)"}, {"Act", "(x T) (k Int)", "(Act k x)"},
      {"BiasAdd", "(x T) (b T)", "(BiasAdd x b)"}, {"ChMul", "(x T) (b T)", "(ChMul x b)"},
      {"BatchNorm", "(x T) (s T) (b T) (m T) (v T) (e Real)", "(BatchNorm x s b m v e)"},
      {"Softmax", "(x T) (a Int)", "(Softmax x a)"}, {"LayerNorm", "(x T) (s T) (a Int) (e Real)", "(LayerNorm x s a e)"},
      {"LayerNorm3", "(x T) (s T) (b T) (a Int) (e Real)", "(LayerNorm3 x s b a e)"},
  };
  for (const auto& s : same)
    add(std::string("shape_") + s.name, "shapes", forall(s.binders, std::string("(= (shape ") + s.term + ") (shape x))", {std::string("(shape ") + s.term + ")"}),
        std::string(s.name) + " keeps its (first) input's shape.");
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow"})
    add(std::string("shape_") + op, "shapes",
        forall("(a T) (b T)", std::string("(= (shape (") + op + " a b)) (bshape (shape a) (shape b)))", {std::string("(shape (") + op + " a b))"}),
        std::string(op) + " broadcasts its inputs' shapes (numpy rules).");
  add("shape_matmul_len", "shapes",
      forall("(a T) (b T)", "(=> (and (>= (rank a) 2) (>= (rank b) 2)) (= (rank (MatMul a b)) (imax (rank a) (rank b))))", {"(shape (MatMul a b))"}),
      "MatMul of operands of rank >= 2 has the larger rank (batch dims broadcast).");
  add("shape_matmul_nth", "shapes",
      forall("(a T) (b T) (i Int)",
             "(let ((ra (rank a)) (rb (rank b)) (r (imax (rank a) (rank b)))) (=> (and (>= ra 2) (>= rb 2) (<= 0 i) (< i r)) "
             "(= (dim (MatMul a b) i) (ite (= i (- r 1)) (dim b (- rb 1)) (ite (= i (- r 2)) (dim a (- ra 2)) "
             "(let ((p (ite (< i (- r ra)) 1 (dim a (- i (- r ra))))) (q (ite (< i (- r rb)) 1 (dim b (- i (- r rb)))))) (ite (= p 1) q p)))))))",
             {"(dim (MatMul a b) i)"}),
      "MatMul: [..., M, K] x [..., K, N] -> [broadcast batch..., M, N].");
  add("shape_conv_len", "shapes", forall("(x T) (w T) (s L) (p L) (d L) (g Int)", "(= (rank (Conv x w s p d g)) (rank x))", {"(shape (Conv x w s p d g))"}),
      "Conv keeps the input's rank.");
  add("shape_conv_nth", "shapes",
      forall("(x T) (w T) (s L) (p L) (d L) (g Int) (i Int)",
             "(let ((n (- (rank x) 2))) (=> (and (<= 0 i) (< i (rank x))) (= (dim (Conv x w s p d g) i) (ite (= i 0) (dim x 0) (ite (= i 1) (dim w 0) "
             "(convout (dim x i) (dim w i) (nth s (- i 2)) (nth p (- i 2)) (nth p (+ (- i 2) n)) (nth d (- i 2))))))))",
             {"(dim (Conv x w s p d g) i)"}),
      "Conv: [N, C, spatial...] with weights [K, C/g, kernel...] -> [N, K, window extents...].");
  add("shape_concat_len", "shapes", forall("(a T) (b T) (ax Int)", "(= (rank (Concat a b ax)) (rank a))", {"(shape (Concat a b ax))"}), "Concat keeps the rank.");
  add("shape_concat_nth", "shapes",
      forall("(a T) (b T) (ax Int) (i Int)", "(=> (and (<= 0 i) (< i (rank a))) (= (dim (Concat a b ax) i) (ite (= i ax) (+ (dim a ax) (dim b ax)) (dim a i))))",
             {"(dim (Concat a b ax) i)"}),
      "Concat adds the extents on its axis and keeps the others.");
  add("shape_split", "shapes", forall("(x T) (ax Int) (sz L) (k Int)", "(= (shape (Split x ax sz k)) (lset (shape x) ax (nth sz k)))", {"(shape (Split x ax sz k))"}),
      "Output k of Split has extent sizes[k] on the axis.");
  add("shape_transpose", "shapes", forall("(x T) (p L)", "(= (shape (Transpose x p)) (permute (shape x) p))", {"(shape (Transpose x p))"}),
      "Transpose: out.shape[i] = in.shape[perm[i]].");
  add("shape_reshape", "shapes", forall("(x T) (s L)", "(= (shape (Reshape x s)) s)", {"(shape (Reshape x s))"}), "Reshape's shape parameter is fully resolved.");
  add("shape_enlarge_len", "shapes", forall("(w T) (k L)", "(= (rank (Enlarge w k)) (rank w))", {"(shape (Enlarge w k))"}), "Enlarge keeps the rank.");
  add("shape_enlarge_nth", "shapes",
      forall("(w T) (k L) (i Int)", "(=> (and (<= 0 i) (< i (rank w))) (= (dim (Enlarge w k) i) (ite (< i 2) (dim w i) (nth k (- i 2)))))", {"(dim (Enlarge w k) i)"}),
      "Enlarge sets the spatial extents to the kernel parameter.");
  add("shape_const", "shapes", forall("(f Int) (s L) (d Int) (v Real)", "(= (shape (Const f s d v)) s)", {"(shape (Const f s d v))"}), "A Constant has its shape parameter.");
  add("shape_gap", "shapes",
      forall("(x T) (i Int)", "(and (= (rank (GAP x)) (rank x)) (=> (and (<= 0 i) (< i (rank x))) (= (dim (GAP x) i) (ite (< i 2) (dim x i) 1))))", {"(dim (GAP x) i)"}),
      "GlobalAveragePool reduces the spatial dims to 1.");

  // ---- arithmetic (real numbers: rounding is not modelled) ----
  add("add_comm", "arithmetic", forall("(x T) (y T)", "(= (Add x y) (Add y x))", {"(Add x y)"}), "Addition commutes (broadcasting is symmetric).");
  add("add_assoc", "arithmetic", forall("(x T) (y T) (z T)", "(= (Add (Add x y) z) (Add x (Add y z)))", {"(Add (Add x y) z)", "(Add x (Add y z))"}),
      "Addition is associative; broadcasting is associative too.");
  add("mul_comm", "arithmetic", forall("(x T) (y T)", "(= (Mul x y) (Mul y x))", {"(Mul x y)"}), "Multiplication commutes.");
  add("mul_assoc", "arithmetic", forall("(x T) (y T) (z T)", "(= (Mul (Mul x y) z) (Mul x (Mul y z)))", {"(Mul (Mul x y) z)", "(Mul x (Mul y z))"}),
      "Multiplication is associative.");
  add("mul_add_distrib", "arithmetic", forall("(x T) (y T) (z T)", "(= (Mul (Add x y) z) (Add (Mul x z) (Mul y z)))", {"(Mul (Add x y) z)", "(Add (Mul x z) (Mul y z))"}),
      "Multiplication distributes over addition; if one side broadcasts, so does the other.");
  add("smul_smul", "arithmetic", forall("(x T) (a Real) (b Real)", "(= (SMul (SMul x a) b) (SMul x (* a b)))", {"(SMul (SMul x a) b)"}), "(xa)b = x(ab).");
  add("smul_add", "arithmetic", forall("(x T) (y T) (a Real)", "(= (SMul (Add x y) a) (Add (SMul x a) (SMul y a)))", {"(SMul (Add x y) a)", "(Add (SMul x a) (SMul y a))"}),
      "Scalar multiplication distributes over addition.");
  add("smul_mul", "arithmetic", forall("(x T) (y T) (a Real)", "(= (SMul (Mul x y) a) (Mul (SMul x a) y))", {"(SMul (Mul x y) a)", "(Mul (SMul x a) y)"}),
      "(xy)a = (xa)y element-wise.");
  add("smul_one", "arithmetic", forall("(x T) (a Real)", "(=> (= a 1.0) (= (SMul x a) x))", {"(SMul x a)"}), "x * 1 = x.");
  add("add_self", "arithmetic", forall("(x T)", "(= (Add x x) (SMul x 2.0))", {"(Add x x)"}), "x + x = 2x.");
  add("smul_add_same", "arithmetic", forall("(x T) (a Real) (b Real)", "(= (Add (SMul x a) (SMul x b)) (SMul x (+ a b)))", {"(Add (SMul x a) (SMul x b))"}),
      "ax + bx = (a + b)x.");
  add("smul_add_self", "arithmetic", forall("(x T) (a Real)", "(= (Add (SMul x a) x) (SMul x (+ a 1.0)))", {"(Add (SMul x a) x)"}), "ax + x = (a + 1)x.");
  add("mul_ones", "arithmetic",
      forall("(x T) (f Int) (sh L) (dt Int) (v Real)",
             "(=> (and (= f 0) (= v 1.0) (or (= sh nil) (= sh (shape x)) (= sh (cons (dim x 1) (ones (- (rank x) 2)))))) (= (Mul x (Const f sh dt v)) x))",
             {"(Mul x (Const f sh dt v))"}),
      "Multiplying by ones that broadcast into x without enlarging it (a scalar, x's own shape, or [C, 1, ..., 1]) changes nothing.");
  add("add_zeros", "arithmetic",
      forall("(x T) (f Int) (sh L) (dt Int) (v Real)",
             "(=> (and (= f 0) (= v 0.0) (or (= sh nil) (= sh (shape x)) (= sh (cons (dim x 1) (ones (- (rank x) 2)))))) (= (Add x (Const f sh dt v)) x))",
             {"(Add x (Const f sh dt v))"}),
      "Adding zeros that broadcast into x without enlarging it changes nothing.");
  add("smul_as_mul", "arithmetic",
      forall("(x T) (f Int) (s L) (d Int) (v Real)", "(=> (and (= f 0) (= s nil)) (= (Mul x (Const f s d v)) (SMul x v)))", {"(Mul x (Const f s d v))"}),
      "Multiplying by a rank-0 constant tensor of value v is scalar multiplication by v.");

  add("div_rank0", "arithmetic",
      forall("(x T) (c T)", "(=> (= (rank c) 0) (= (Div x c) (SMul x (/ 1.0 (SVal c)))))", {"(Div x c)"}),
      "Dividing by a rank-0 tensor of value v is scalar multiplication by 1/v (reals; a zero divisor is not modelled, as "
      "everywhere in this theory).");
  add("mul_rank0", "arithmetic", forall("(x T) (c T)", "(=> (= (rank c) 0) (= (Mul x c) (SMul x (SVal c))))", {"(Mul x c)"}),
      "Multiplying by a rank-0 tensor of value v is scalar multiplication by v.");

  // ---- activations ----
  add("relu_idem", "activations", forall("(x T)", "(= (Relu (Relu x)) (Relu x))", {"(Relu (Relu x))"}), "relu(relu(x)) = relu(x).");
  add("relu_smul_nonneg", "activations", forall("(x T) (a Real)", "(=> (>= a 0.0) (= (Relu (SMul x a)) (SMul (Relu x) a)))", {"(Relu (SMul x a))", "(SMul (Relu x) a)"}),
      "max(ax, 0) = a max(x, 0) for a >= 0.");
  add("relu_maxpool", "activations",
      forall("(x T) (k L) (s L) (p L) (c Int) (i Int)", "(= (Relu (MaxPool x k s p c i)) (MaxPool (Relu x) k s p c i))", {"(Relu (MaxPool x k s p c i))", "(MaxPool (Relu x) k s p c i)"}),
      "relu is monotone, so it commutes with max; every pooling window holds at least one input element (pads < kernel).");
  for (const auto& u : kUnary) {
    const std::string b = u.binders;
    const std::string n = u.name;
    add("concat_" + n, "element-wise", forall("(a T) (c T) (ax Int)" + b, "(= " + with(u.apply, "(Concat a c ax)") + " (Concat " + with(u.apply, "a") + " " + with(u.apply, "c") + " ax))",
                                              {with(u.apply, "(Concat a c ax)"), "(Concat " + with(u.apply, "a") + " " + with(u.apply, "c") + " ax)"}),
        n + " is element-wise, so it commutes with Concat (it keeps shapes, so both sides are well-formed together).");
    add("split_" + n, "element-wise", forall("(x T) (ax Int) (sz L) (j Int)" + b, "(= " + with(u.apply, "(Split x ax sz j)") + " (Split " + with(u.apply, "x") + " ax sz j))",
                                             {with(u.apply, "(Split x ax sz j)"), "(Split " + with(u.apply, "x") + " ax sz j)"}),
        n + " is element-wise, so it commutes with Split.");
    add("transpose_" + n, "element-wise", forall("(x T) (p L)" + b, "(= " + with(u.apply, "(Transpose x p)") + " (Transpose " + with(u.apply, "x") + " p))",
                                                 {with(u.apply, "(Transpose x p)"), "(Transpose " + with(u.apply, "x") + " p)"}),
        n + " is element-wise, so it commutes with Transpose.");
    add("reshape_" + n, "element-wise", forall("(x T) (s L)" + b, "(= " + with(u.apply, "(Reshape x s)") + " (Reshape " + with(u.apply, "x") + " s))",
                                               {with(u.apply, "(Reshape x s)"), "(Reshape " + with(u.apply, "x") + " s)"}),
        n + " is element-wise, so it commutes with Reshape (row-major order is kept).");
  }
  for (const char* op : {"Add", "Mul", "Div", "Pow"}) {
    const std::string f = op;
    add("concat_" + f, "element-wise",
        forall("(a T) (b T) (c T) (d T) (ax Int) (axc Int)",
               "(=> (and (<= 0 axc) (<= 0 ax) (= (- (rank a) ax) (- (rank c) axc)) (= (dim a ax) (dim c axc)) (= (dim b ax) (dim d axc))) "
               "(= (" + f + " (Concat a b ax) (Concat c d axc)) (Concat (" + f + " a c) (" + f + " b d) (ite (>= (rank a) (rank c)) ax axc))))",
               {"(" + f + " (Concat a b ax) (Concat c d axc))"}),
        f + " of two Concats whose axes line up (counted from the right, as broadcasting aligns dims) and whose pieces have equal extents on that axis "
            "is the Concat of the pieces' " + f + "s; off-axis dims may still broadcast.");
    add("concat_" + f + "_rev", "element-wise",
        forall("(a T) (b T) (c T) (d T) (ax Int)", "(=> (and (= (shape a) (shape c)) (= (shape b) (shape d))) (= (Concat (" + f + " a c) (" + f + " b d) ax) (" + f + " (Concat a b ax) (Concat c d ax))))",
               {"(Concat (" + f + " a c) (" + f + " b d) ax)"}),
        "The reverse of concat_" + f + " for operands of equal shapes (so the Concats it creates are well-formed).");
    add("transpose_" + f, "element-wise",
        forall("(a T) (b T) (p L) (q L)", "(=> (and (= p q) (= (rank a) (rank b)) (= (len p) (rank a))) (= (" + f + " (Transpose a p) (Transpose b q)) (Transpose (" + f + " a b) p)))",
               {"(" + f + " (Transpose a p) (Transpose b q))"}),
        f + " of equally transposed operands of equal rank is the transposed " + f + ".");
    add("transpose_" + f + "_rev", "element-wise",
        forall("(a T) (b T) (p L)", "(=> (and (= (rank a) (rank b)) (= (len p) (rank a))) (= (Transpose (" + f + " a b) p) (" + f + " (Transpose a p) (Transpose b p))))",
               {"(Transpose (" + f + " a b) p)"}),
        "The reverse of transpose_" + f + ".");
    add("split_" + f, "element-wise",
        forall("(x T) (y T) (ax Int) (sz L) (k Int) (ay Int) (sy L) (ky Int)",
               "(=> (and (= ax ay) (= sz sy) (= k ky) (= (shape x) (shape y))) (= (" + f + " (Split x ax sz k) (Split y ay sy ky)) (Split (" + f + " x y) ax sz k)))",
               {"(" + f + " (Split x ax sz k) (Split y ay sy ky))"}),
        f + " of the same piece of two equally shaped tensors is that piece of their " + f + ".");
    add("split_" + f + "_rev", "element-wise",
        forall("(x T) (y T) (ax Int) (sz L) (k Int)", "(=> (= (shape x) (shape y)) (= (Split (" + f + " x y) ax sz k) (" + f + " (Split x ax sz k) (Split y ax sz k))))",
               {"(Split (" + f + " x y) ax sz k)"}),
        "The reverse of split_" + f + ".");
    add("concat_bcast_" + f, "element-wise",
        forall("(a T) (c T) (b T) (ax Int)", "(=> (flat_on b a ax) (= (" + f + " (Concat a c ax) b) (Concat (" + f + " a b) (" + f + " c b) ax)))",
               {"(" + f + " (Concat a c ax) b)"}),
        f + " of a Concat and an operand that is constant along the Concat's axis (extent 1 there, or no such axis): apply it to each piece.");
    add("concat_bcast_" + f + "_r", "element-wise",
        forall("(a T) (c T) (b T) (ax Int)", "(=> (flat_on b a ax) (= (" + f + " b (Concat a c ax)) (Concat (" + f + " b a) (" + f + " b c) ax)))",
               {"(" + f + " b (Concat a c ax))"}),
        "concat_bcast_" + f + " with the Concat as the second operand.");
    add("concat_bcast_" + f + "_rev", "element-wise",
        forall("(a T) (c T) (b T) (ax Int)", "(=> (and (flat_on b a ax) (= (shape a) (shape c))) (= (Concat (" + f + " a b) (" + f + " c b) ax) (" + f + " (Concat a c ax) b)))",
               {"(Concat (" + f + " a b) (" + f + " c b) ax)"}),
        "The reverse of concat_bcast_" + f + " for pieces of equal shape.");
    add("concat_bcast_" + f + "_r_rev", "element-wise",
        forall("(a T) (c T) (b T) (ax Int)", "(=> (and (flat_on b a ax) (= (shape a) (shape c))) (= (Concat (" + f + " b a) (" + f + " b c) ax) (" + f + " b (Concat a c ax))))",
               {"(Concat (" + f + " b a) (" + f + " b c) ax)"}),
        "The reverse of concat_bcast_" + f + "_r.");
    add("transpose_hw_bcast_" + f, "element-wise",
        forall("(x T) (b T) (q L)", "(=> (and (hwperm q) (= (rank x) 4) (hwflat b)) (= (" + f + " (Transpose x q) b) (Transpose (" + f + " x b) q)))",
               {"(" + f + " (Transpose x q) b)", "(Transpose (" + f + " x b) q)"}),
        "Swapping the last two axes commutes with " + f + " by an operand whose last two dims are 1 (or missing): it is the same along both.");
    add("transpose_hw_bcast_" + f + "_r", "element-wise",
        forall("(x T) (b T) (q L)", "(=> (and (hwperm q) (= (rank x) 4) (hwflat b)) (= (" + f + " b (Transpose x q)) (Transpose (" + f + " b x) q)))",
               {"(" + f + " b (Transpose x q))", "(Transpose (" + f + " b x) q)"}),
        "transpose_hw_bcast_" + f + " with the transposed tensor as the second operand.");
  }

  // ---- Concat and Split ----
  add("split_concat_0", "concat/split",
      forall("(a T) (b T) (ax Int) (ay Int) (s0 Int) (s1 Int) (k Int)",
             "(=> (and (= ax ay) (= k 0) (= s0 (dim a ax)) (= s1 (dim b ax))) (= (Split (Concat a b ax) ay (l2 s0 s1) k) a))",
             {"(Split (Concat a b ax) ay (l2 s0 s1) k)"}),
      "Splitting a Concat at the boundary between its inputs (on its axis) gives back the first input.");
  add("split_concat_1", "concat/split",
      forall("(a T) (b T) (ax Int) (ay Int) (s0 Int) (s1 Int) (k Int)",
             "(=> (and (= ax ay) (= k 1) (= s0 (dim a ax)) (= s1 (dim b ax))) (= (Split (Concat a b ax) ay (l2 s0 s1) k) b))",
             {"(Split (Concat a b ax) ay (l2 s0 s1) k)"}),
      "... and the second input.");
  add("concat_split", "concat/split",
      forall("(x T) (ax Int) (sz L) (k Int)",
             "(=> (and (= (len sz) 2) (<= 0 ax) (< ax (rank x)) (>= (nth sz 0) 0) (>= (nth sz 1) 0) (= (+ (nth sz 0) (nth sz 1)) (dim x ax))) "
             "(= (Concat (Split x ax sz 0) (Split x ax sz 1) ax) x))",
             {"(Split x ax sz k)"}),
      "A two-way Split's pieces concatenated on its axis give back its input.");
  add("split3_nested", "concat/split",
      forall("(x T) (ax Int) (s0 Int) (s1 Int) (s2 Int) (k Int)",
             "(=> (and (<= 0 k) (<= k 2)) (= (Split x ax (cons s0 (cons s1 (cons s2 nil))) k) (ite (= k 0) (Split x ax (l2 s0 (+ s1 s2)) 0) "
             "(Split (Split x ax (l2 s0 (+ s1 s2)) 1) ax (l2 s1 s2) (- k 1)))))",
             {"(Split x ax (cons s0 (cons s1 (cons s2 nil))) k)"}),
      "A three-way Split is a two-way Split whose second piece is split again.");
  add("concat_interchange", "concat/split",
      forall("(a T) (b T) (c T) (d T) (ax Int) (ay Int) (az Int)",
             "(=> (and (= ax ay) (not (= ax az)) (= (dim a ax) (dim c ax))) (= (Concat (Concat a b ax) (Concat c d ay) az) (Concat (Concat a c az) (Concat b d az) ax)))",
             {"(Concat (Concat a b ax) (Concat c d ay) az)"}),
      "A 2x2 block tensor can be assembled row-first or column-first when the blocks line up (a and c equally long on the inner axis).");
  add("concat_assoc", "concat/split",
      forall("(a T) (b T) (c T) (ax Int) (ay Int)", "(=> (= ax ay) (= (Concat (Concat a b ax) c ay) (Concat a (Concat b c ax) ay)))",
             {"(Concat (Concat a b ax) c ay)", "(Concat a (Concat b c ax) ay)"}),
      "Concat on one axis is associative.");

  // ---- Transpose and Reshape ----
  add("transpose_compose", "transpose/reshape",
      forall("(x T) (p L) (q L)", "(= (Transpose (Transpose x p) q) (Transpose x (permute p q)))", {"(Transpose (Transpose x p) q)"}),
      "Transposing by p then q moves input dim p[q[i]] to position i: one Transpose by permute(p, q).");
  add("transpose_identity", "transpose/reshape", forall("(x T) (p L)", "(=> (= p (iota (rank x))) (= (Transpose x p) x))", {"(Transpose x p)"}),
      "The identity permutation changes nothing.");
  add("transpose_concat", "transpose/reshape",
      forall("(a T) (b T) (ax Int) (p L)", "(=> (= (len p) (rank a)) (= (Transpose (Concat a b ax) p) (Concat (Transpose a p) (Transpose b p) (lindex p ax))))",
             {"(Transpose (Concat a b ax) p)"}),
      "Transposing a Concat concatenates the transposed inputs on the axis's new position.");
  add("reshape_compose", "transpose/reshape", forall("(x T) (s L) (t L)", "(= (Reshape (Reshape x s) t) (Reshape x t))", {"(Reshape (Reshape x s) t)"}),
      "Reshapes keep the row-major element order, so only the last one matters.");
  add("reshape_identity", "transpose/reshape", forall("(x T) (s L)", "(=> (= s (shape x)) (= (Reshape x s) x))", {"(Reshape x s)"}),
      "Reshaping to the shape a tensor already has changes nothing.");
  for (int r = 1; r <= 6; ++r) {
    std::string same = "(= (len s) " + std::to_string(r) + ") (= (rank x) " + std::to_string(r) + ")";
    for (int i = 0; i < r; ++i) same += " (= (nth s " + std::to_string(i) + ") (dim x " + std::to_string(i) + "))";
    add("reshape_identity_rank" + std::to_string(r), "transpose/reshape",
        forall("(x T) (s L)", "(=> (and " + same + ") (= (Reshape x s) x))", {"(Reshape x s)"}),
        "reshape_identity with the shape compared extent by extent, for a tensor of rank " + std::to_string(r) +
            " whose shape is only known through its extents (lists are compared element-wise).");
  }
  add("matmul_reshape_rows", "transpose/reshape",
      forall("(x T) (w T) (s L)",
             "(=> (and (= (rank w) 2) (>= (rank x) 2) (>= (len s) 2) (= (nth s (- (len s) 1)) (dim x (- (rank x) 1)))) "
             "(= (MatMul (Reshape x s) w) (Reshape (MatMul x w) (lset s (- (len s) 1) (dim w 1)))))",
             {"(MatMul (Reshape x s) w)"}),
      "A product by a matrix acts on each row (the last axis) alone, so regrouping the rows by a Reshape that keeps the "
      "last axis commutes with it; the result's last extent becomes the matrix's column count.");
  add("add_bias_reshape", "transpose/reshape",
      forall("(a T) (b T) (s L)",
             "(=> (and (= (rank b) 1) (>= (rank a) 1) (>= (len s) 1) (= (nth s (- (len s) 1)) (dim a (- (rank a) 1))) "
             "(or (= (dim b 0) 1) (= (dim b 0) (dim a (- (rank a) 1))))) (= (Add (Reshape a s) b) (Reshape (Add a b) s)))",
             {"(Add (Reshape a s) b)"}),
      "A bias over the last axis (or a single value) is added to every row alike, so it commutes with a Reshape that keeps "
      "the last axis.");

  // ---- MatMul ----
  add("matmul_assoc", "matmul", forall("(a T) (b T) (c T)", "(= (MatMul (MatMul a b) c) (MatMul a (MatMul b c)))", {"(MatMul (MatMul a b) c)", "(MatMul a (MatMul b c))"}),
      "Matrix products are associative (batch dims broadcast alike on both sides).");
  add("matmul_add_left", "matmul",
      forall("(a T) (b T) (c T)", "(=> (= (shape a) (shape b)) (= (MatMul (Add a b) c) (Add (MatMul a c) (MatMul b c))))", {"(MatMul (Add a b) c)", "(Add (MatMul a c) (MatMul b c))"}),
      "MatMul is linear in its first operand (equal shapes, so no broadcasting changes the sum).");
  add("matmul_add_right", "matmul",
      forall("(a T) (b T) (c T)", "(=> (= (shape b) (shape c)) (= (MatMul a (Add b c)) (Add (MatMul a b) (MatMul a c))))", {"(MatMul a (Add b c))", "(Add (MatMul a b) (MatMul a c))"}),
      "MatMul is linear in its second operand.");
  add("matmul_smul_left", "matmul", forall("(a T) (b T) (u Real)", "(= (MatMul (SMul a u) b) (SMul (MatMul a b) u))", {"(MatMul (SMul a u) b)", "(SMul (MatMul a b) u)"}),
      "(ua)b = u(ab).");
  add("matmul_smul_right", "matmul", forall("(a T) (b T) (u Real)", "(= (MatMul a (SMul b u)) (SMul (MatMul a b) u))", {"(MatMul a (SMul b u))"}), "a(ub) = u(ab).");
  add("matmul_concat_cols", "matmul",
      forall("(x T) (w T) (v T) (ax Int)",
             "(=> (and (>= (rank x) 2) (>= (rank w) 2) (= (rank v) (rank w)) (= ax (- (rank w) 1))) "
             "(= (MatMul x (Concat w v ax)) (Concat (MatMul x w) (MatMul x v) (- (imax (rank x) (rank w)) 1))))",
             {"(MatMul x (Concat w v ax))"}),
      "x [w | v] = [xw | xv]: output columns come from weight columns.");
  add("matmul_concat_cols_rev", "matmul",
      forall("(x T) (w T) (v T) (ax Int)",
             "(=> (and (>= (rank x) 2) (= (rank w) 2) (= (rank v) 2) (= ax (- (rank x) 1))) (= (Concat (MatMul x w) (MatMul x v) ax) (MatMul x (Concat w v 1))))",
             {"(Concat (MatMul x w) (MatMul x v) ax)"}),
      "The reverse of matmul_concat_cols for matrices (whose row counts agree since both products are well-formed).");
  add("matmul_concat_rows", "matmul",
      forall("(a T) (b T) (w T) (ax Int)",
             "(=> (and (>= (rank w) 2) (>= (rank a) (rank w)) (or (= ax (- (rank a) 2)) (and (<= 0 ax) (< ax (- (rank a) (rank w)))))) "
             "(= (MatMul (Concat a b ax) w) (Concat (MatMul a w) (MatMul b w) ax)))",
             {"(MatMul (Concat a b ax) w)"}),
      "[a; b] w = [aw; bw] for a row axis, or for a batch axis that w does not have.");
  add("matmul_concat_inner", "matmul",
      forall("(a1 T) (a2 T) (b1 T) (b2 T) (ax Int) (bx Int)",
             "(=> (and (>= (rank a1) 2) (>= (rank b1) 2) (= ax (- (rank a1) 1)) (= bx (- (rank b1) 2)) (= (dim a1 ax) (dim b1 bx))) "
             "(= (MatMul (Concat a1 a2 ax) (Concat b1 b2 bx)) (Add (MatMul a1 b1) (MatMul a2 b2))))",
             {"(MatMul (Concat a1 a2 ax) (Concat b1 b2 bx))"}),
      "[a1 | a2][b1; b2] = a1 b1 + a2 b2 when the inner extents line up.");
  add("matmul_scale_cols", "matmul",
      forall("(x T) (w T) (b T)",
             "(=> (and (>= (rank x) 2) (>= (rank w) 2) (= (rank b) 1) (= (dim b 0) (dim w (- (rank w) 1)))) (= (Mul (MatMul x w) b) (MatMul x (Mul w b))))",
             {"(Mul (MatMul x w) b)", "(MatMul x (Mul w b))"}),
      "Scaling output column j (a vector broadcast on the last axis) is scaling weight column j.");
  add("matmul_transpose", "matmul",
      forall("(a T) (b T) (p L)", "(=> (and (= (rank a) 2) (= (rank b) 2) (= p (l2 1 0))) (= (Transpose (MatMul a b) p) (MatMul (Transpose b p) (Transpose a p))))",
             {"(Transpose (MatMul a b) p)", "(MatMul (Transpose b p) (Transpose a p))"}),
      "(ab)^T = b^T a^T for matrices.");

  // ---- Conv ----
  add("conv_add_weight", "conv",
      forall("(x T) (w T) (v T) (s L) (p L) (d L) (g Int)", "(=> (= (shape w) (shape v)) (= (Conv x (Add w v) s p d g) (Add (Conv x w s p d g) (Conv x v s p d g))))",
             {"(Conv x (Add w v) s p d g)", "(Add (Conv x w s p d g) (Conv x v s p d g))"}),
      "Convolution is linear in the kernel.");
  add("conv_add_input", "conv",
      forall("(x T) (y T) (w T) (s L) (p L) (d L) (g Int)", "(=> (= (shape x) (shape y)) (= (Conv (Add x y) w s p d g) (Add (Conv x w s p d g) (Conv y w s p d g))))",
             {"(Conv (Add x y) w s p d g)", "(Add (Conv x w s p d g) (Conv y w s p d g))"}),
      "Convolution is linear in the input (zero padding is linear too).");
  add("conv_smul_weight", "conv",
      forall("(x T) (w T) (u Real) (s L) (p L) (d L) (g Int)", "(= (Conv x (SMul w u) s p d g) (SMul (Conv x w s p d g) u))",
             {"(Conv x (SMul w u) s p d g)", "(SMul (Conv x w s p d g) u)"}),
      "Scaling the kernel scales the output.");
  add("conv_smul_input", "conv",
      forall("(x T) (w T) (u Real) (s L) (p L) (d L) (g Int)", "(= (Conv (SMul x u) w s p d g) (SMul (Conv x w s p d g) u))", {"(Conv (SMul x u) w s p d g)"}),
      "Scaling the input scales the output.");
  add("conv_concat_weight", "conv",
      forall("(x T) (w T) (v T) (s L) (p L) (d L) (g Int) (ax Int)",
             "(=> (and (= ax 0) (= g 1)) (= (Conv x (Concat w v ax) s p d g) (Concat (Conv x w s p d g) (Conv x v s p d g) 1)))", {"(Conv x (Concat w v ax) s p d g)"}),
      "Without groups, output channels come from kernels independently: stacking kernels stacks output channels. "
      "(False for grouped convolutions: stacking moves kernels into other groups.)");
  add("conv_concat_weight_rev", "conv",
      forall("(x T) (w T) (v T) (s L) (p L) (d L) (g Int) (ax Int)",
             "(=> (and (= ax 1) (= g 1) (= (rank w) 4) (= (rank v) 4) (= (dim w 1) (dim v 1)) (= (dim w 2) (dim v 2)) (= (dim w 3) (dim v 3))) "
             "(= (Concat (Conv x w s p d g) (Conv x v s p d g) ax) (Conv x (Concat w v 0) s p d g)))",
             {"(Concat (Conv x w s p d g) (Conv x v s p d g) ax)"}),
      "The reverse of conv_concat_weight for 2-D kernels of equal size.");
  add("conv_concat_input", "conv",
      forall("(x T) (y T) (w T) (v T) (s L) (p L) (d L) (g Int) (ax Int) (bx Int)",
             "(=> (and (= g 1) (= ax 1) (= bx 1) (= (dim x 1) (dim w 1))) (= (Conv (Concat x y ax) (Concat w v bx) s p d g) (Add (Conv x w s p d g) (Conv y v s p d g))))",
             {"(Conv (Concat x y ax) (Concat w v bx) s p d g)"}),
      "Without groups, a convolution sums over input channels: split the channels of input and kernel alike.");
  add("conv_concat_batch", "conv",
      forall("(x T) (y T) (w T) (s L) (p L) (d L) (g Int) (ax Int)", "(=> (= ax 0) (= (Conv (Concat x y ax) w s p d g) (Concat (Conv x w s p d g) (Conv y w s p d g) 0)))",
             {"(Conv (Concat x y ax) w s p d g)"}),
      "Batch items are convolved independently.");
  add("conv_enlarge", "conv",
      forall("(x T) (w T) (k1 Int) (k2 Int) (s L) (q1 Int) (q2 Int) (q3 Int) (q4 Int) (d L) (g Int)",
             "(let ((e1 (- k1 (dim w 2))) (e2 (- k2 (dim w 3)))) (=> (and (= (rank w) 4) (= d (l2 1 1)) (>= e1 0) (>= e2 0) (= (mod e1 2) 0) (= (mod e2 2) 0) "
             "(>= q1 (div e1 2)) (>= q3 (div e1 2)) (>= q2 (div e2 2)) (>= q4 (div e2 2))) "
             "(= (Conv x (Enlarge w (l2 k1 k2)) s (l4 q1 q2 q3 q4) d g) (Conv x w s (l4 (- q1 (div e1 2)) (- q2 (div e2 2)) (- q3 (div e1 2)) (- q4 (div e2 2))) d g))))",
             {"(Conv x (Enlarge w (l2 k1 k2)) s (l4 q1 q2 q3 q4) d g)"}),
      "Zero-padding a kernel by e on each side, with e more padding of the input on each side, computes the same windows (dilation 1): "
      "the extra taps multiply zeros.");
  add("conv_identity_kernel", "conv",
      forall("(x T) (f Int) (sh L) (dt Int) (v Real) (s L) (p L) (d L) (g Int)",
             "(=> (and (= f 1) (= (rank x) 4) (= (len sh) 4) (= (nth sh 0) (dim x 1)) (= (* (nth sh 1) g) (dim x 1)) (>= g 1) (= (mod (nth sh 2) 2) 1) (= (mod (nth sh 3) 2) 1) "
             "(= s (l2 1 1)) (= d (l2 1 1)) (= p (l4 (div (nth sh 2) 2) (div (nth sh 3) 2) (div (nth sh 2) 2) (div (nth sh 3) 2)))) "
             "(= (Conv x (Const f sh dt v) s p d g) x))",
             {"(Conv x (Const f sh dt v) s p d g)"}),
      "The identity kernel (Constant fill 1: a 1 at the centre of channel c's own input channel) with 'same' padding, unit strides and "
      "dilations reproduces the input.");
  add("conv_scale_out_channels", "conv",
      forall("(x T) (w T) (k T) (r L) (s L) (p L) (d L) (g Int)",
             "(=> (and (>= (rank w) 3) (= r (cons (dim w 0) (ones (- (rank w) 1)))) (= (rank k) 1) (= (dim k 0) (dim w 0))) "
             "(= (Conv x (Mul w (Reshape k r)) s p d g) (ChMul (Conv x w s p d g) k)))",
             {"(Conv x (Mul w (Reshape k r)) s p d g)"}),
      "Scaling kernel c (a [C, 1, ..., 1] factor broadcast over the kernel) scales output channel c.");
  add("avgpool_as_conv", "conv",
      forall("(x T) (f Int) (sh L) (dt Int) (v Real) (s L) (p L) (d L) (g Int)",
             "(=> (and (= f 2) (= (rank x) 4) (= g (dim x 1)) (= (len sh) 4) (= (nth sh 0) (dim x 1)) (= (nth sh 1) 1) (= d (l2 1 1)) (= p (zeros 4))) "
             "(= (Conv x (Const f sh dt v) s p d g) (AvgPool x (l2 (nth sh 2) (nth sh 3)) s p 0 1)))",
             {"(Conv x (Const f sh dt v) s p d g)"}),
      "A depthwise convolution with the average-pooling kernel (Constant fill 2: 1/(kh kw) everywhere) and no padding is AveragePool.");

  add("conv_concat_batch_rev", "conv",
      forall("(x T) (y T) (w T) (s L) (p L) (d L) (g Int) (ax Int)",
             "(=> (and (= ax 0) (= (rank x) 4) (= (rank y) 4) (= (dim x 1) (dim y 1)) (= (dim x 2) (dim y 2)) (= (dim x 3) (dim y 3))) "
             "(= (Concat (Conv x w s p d g) (Conv y w s p d g) ax) (Conv (Concat x y 0) w s p d g)))",
             {"(Concat (Conv x w s p d g) (Conv y w s p d g) ax)"}),
      "The reverse of conv_concat_batch for inputs of equal channel and spatial extents.");
  add("conv_scale_in_channels", "conv",
      forall("(x T) (b T) (w T) (s L) (p L) (d L) (g Int)",
             "(=> (and (= g 1) (>= (rank x) 3) (= (rank w) (rank x)) (perchannel b x)) (= (Conv (Mul x b) w s p d g) (Conv x (Mul w b) s p d g)))",
             {"(Conv (Mul x b) w s p d g)"}),
      "Scaling input channel c (a [C, 1, ..., 1] factor) is scaling the kernels' input channel c; zero padding stays zero. "
      "(Without groups, so the factor lines up with the kernel's second axis.)");
  add("conv_scale_in_channels_rev", "conv",
      forall("(x T) (b T) (w T) (s L) (p L) (d L) (g Int)",
             "(=> (and (= g 1) (>= (rank x) 3) (= (rank w) (rank x)) (perchannel b x)) (= (Conv x (Mul w b) s p d g) (Conv (Mul x b) w s p d g)))",
             {"(Conv x (Mul w b) s p d g)"}),
      "The reverse of conv_scale_in_channels.");
  add("conv1x1_transpose_hw", "conv",
      forall("(x T) (q L) (w T) (s L) (p L) (d L) (g Int)",
             "(=> (and (hwperm q) (= (rank x) 4) (= (rank w) 4) (= (dim w 2) 1) (= (dim w 3) 1) (= (len s) 2) (= (len p) 4) (= (len d) 2)) "
             "(= (Conv (Transpose x q) w s p d g) (Transpose (Conv x w (swap2 s) (swap4 p) (swap2 d) g) q)))",
             {"(Conv (Transpose x q) w s p d g)", "(Transpose (Conv x w (swap2 s) (swap4 p) (swap2 d) g) q)"}),
      "Convolving an image with H and W swapped by a 1x1 kernel (its own transpose) is convolving the image with strides, pads and "
      "dilations swapped, then swapping H and W. (The general case swaps the kernel too; it is left out because it makes the "
      "solver's instantiation loop.)");
  add("conv1x1_transpose_hw_rev", "conv",
      forall("(x T) (q L) (w T) (s L) (p L) (d L) (g Int)",
             "(=> (and (hwperm q) (= (rank x) 4) (= (rank w) 4) (= (dim w 2) 1) (= (dim w 3) 1) (= (len s) 2) (= (len p) 4) (= (len d) 2)) "
             "(= (Transpose (Conv x w s p d g) q) (Conv (Transpose x q) w (swap2 s) (swap4 p) (swap2 d) g)))",
             {"(Transpose (Conv x w s p d g) q)"}),
      "The reverse of conv1x1_transpose_hw.");
  add("conv1x1_avgpool", "conv",
      forall("(x T) (k L) (s L) (p L) (c Int) (i Int) (w T) (s1 L) (p1 L) (d1 L) (g Int)",
             "(=> (and (= (rank w) 4) (= (dim w 2) 1) (= (dim w 3) 1) (= s1 (l2 1 1)) (= p1 (zeros 4))) "
             "(= (Conv (AvgPool x k s p c i) w s1 p1 d1 g) (AvgPool (Conv x w s1 p1 d1 g) k s p c i)))",
             {"(Conv (AvgPool x k s p c i) w s1 p1 d1 g)", "(AvgPool (Conv x w s1 p1 d1 g) k s p c i)"}),
      "A 1x1 convolution (unit strides, no padding) mixes channels pixel by pixel, a linear map that commutes with averaging the same "
      "windows of every channel.");
  add("avgpool_cip_nopad", "conv",
      forall("(x T) (k L) (s L) (p L) (c Int) (i Int)", "(=> (and (= c 0) (= p (zeros (len p)))) (= (AvgPool x k s p c i) (AvgPool x k s p c 1)))",
             {"(AvgPool x k s p c i)"}),
      "Without padding (and without ceil mode, whose last window may overhang) count_include_pad changes nothing.");

  // ---- pooling (per batch item and channel) ----
  for (const char* pool : {"MaxPool", "AvgPool"}) {
    const std::string P = pool;
    add("concat_" + P, "pooling",
        forall("(a T) (b T) (ax Int) (k L) (s L) (p L) (c Int) (i Int)",
               "(=> (or (= ax 0) (= ax 1)) (= (" + P + " (Concat a b ax) k s p c i) (Concat (" + P + " a k s p c i) (" + P + " b k s p c i) ax)))",
               {"(" + P + " (Concat a b ax) k s p c i)"}),
        P + " works on each batch item and channel alone, so it commutes with Concat on axis 0 or 1.");
    add("concat_" + P + "_rev", "pooling",
        forall("(a T) (b T) (ax Int) (k L) (s L) (p L) (c Int) (i Int)",
               "(=> (and (or (= ax 0) (= ax 1)) (= (rank a) 4) (= (rank b) 4) (= (dim a 2) (dim b 2)) (= (dim a 3) (dim b 3)) "
               "(=> (= ax 0) (= (dim a 1) (dim b 1))) (=> (= ax 1) (= (dim a 0) (dim b 0)))) "
               "(= (Concat (" + P + " a k s p c i) (" + P + " b k s p c i) ax) (" + P + " (Concat a b ax) k s p c i)))",
               {"(Concat (" + P + " a k s p c i) (" + P + " b k s p c i) ax)"}),
        "The reverse of concat_" + P + " for inputs whose other extents agree.");
    add("transpose_hw_" + P, "pooling",
        forall("(x T) (q L) (k L) (s L) (p L) (c Int) (i Int)",
               "(=> (and (hwperm q) (= (rank x) 4) (= (len k) 2) (= (len s) 2) (= (len p) 4)) "
               "(= (" + P + " (Transpose x q) k s p c i) (Transpose (" + P + " x (swap2 k) (swap2 s) (swap4 p) c i) q)))",
               {"(" + P + " (Transpose x q) k s p c i)"}),
        "Pooling an image with H and W swapped is pooling it with swapped kernel, strides and pads, then swapping.");
    add("transpose_hw_" + P + "_rev", "pooling",
        forall("(x T) (q L) (k L) (s L) (p L) (c Int) (i Int)",
               "(=> (and (hwperm q) (= (rank x) 4) (= (len k) 2) (= (len s) 2) (= (len p) 4)) "
               "(= (Transpose (" + P + " x k s p c i) q) (" + P + " (Transpose x q) (swap2 k) (swap2 s) (swap4 p) c i)))",
               {"(Transpose (" + P + " x k s p c i) q)"}),
        "The reverse of transpose_hw_" + P + ".");
  }
  add("maxpool_smul", "pooling",
      forall("(x T) (u Real) (k L) (s L) (p L) (c Int) (i Int)", "(=> (>= u 0.0) (= (MaxPool (SMul x u) k s p c i) (SMul (MaxPool x k s p c i) u)))",
             {"(MaxPool (SMul x u) k s p c i)", "(SMul (MaxPool x k s p c i) u)"}),
      "max(u x) = u max(x) for u >= 0 (padding is -infinity, and every window holds an input element).");
  add("avgpool_smul", "pooling",
      forall("(x T) (u Real) (k L) (s L) (p L) (c Int) (i Int)", "(= (AvgPool (SMul x u) k s p c i) (SMul (AvgPool x k s p c i) u))",
             {"(AvgPool (SMul x u) k s p c i)", "(SMul (AvgPool x k s p c i) u)"}),
      "Averaging is linear (zero padding scales to zero).");
  add("avgpool_add", "pooling",
      forall("(x T) (y T) (k L) (s L) (p L) (c Int) (i Int)", "(=> (= (shape x) (shape y)) (= (AvgPool (Add x y) k s p c i) (Add (AvgPool x k s p c i) (AvgPool y k s p c i))))",
             {"(AvgPool (Add x y) k s p c i)", "(Add (AvgPool x k s p c i) (AvgPool y k s p c i))"}),
      "Averaging is linear.");
  add("avgpool_mul_channel", "pooling",
      forall("(x T) (b T) (k L) (s L) (p L) (c Int) (i Int)", "(=> (perchannel b x) (= (AvgPool (Mul x b) k s p c i) (Mul (AvgPool x k s p c i) b)))",
             {"(AvgPool (Mul x b) k s p c i)", "(Mul (AvgPool x k s p c i) b)"}),
      "Scaling a channel by a constant scales its averages.");
  add("maxpool_add_channel", "pooling",
      forall("(x T) (b T) (k L) (s L) (p L) (c Int) (i Int)", "(=> (or (= (rank b) 0) (perchannel b x)) (= (MaxPool (Add x b) k s p c i) (Add (MaxPool x k s p c i) b)))",
             {"(MaxPool (Add x b) k s p c i)", "(Add (MaxPool x k s p c i) b)"}),
      "Shifting a channel by a constant shifts its maxima (-infinity padding stays -infinity).");
  add("avgpool_add_channel", "pooling",
      forall("(x T) (b T) (k L) (s L) (p L) (c Int) (i Int)",
             "(=> (and (or (= (rank b) 0) (perchannel b x)) (or (= i 0) (and (= c 0) (= p (zeros (len p)))))) (= (AvgPool (Add x b) k s p c i) (Add (AvgPool x k s p c i) b)))",
             {"(AvgPool (Add x b) k s p c i)", "(Add (AvgPool x k s p c i) b)"}),
      "Shifting a channel by a constant shifts its averages, when padded zeros are not counted (count_include_pad 0) or there are none.");
  add("transpose_batchnorm", "pooling",
      forall("(x T) (q L) (s T) (b T) (m T) (v T) (e Real)",
             "(=> (and (= (len q) (rank x)) (>= (rank x) 2) (= (nth q 1) 1)) (= (BatchNorm (Transpose x q) s b m v e) (Transpose (BatchNorm x s b m v e) q)))",
             {"(BatchNorm (Transpose x q) s b m v e)", "(Transpose (BatchNorm x s b m v e) q)"}),
      "BatchNorm is element-wise per channel, so it commutes with a Transpose that keeps the channel axis in place.");
  add("concat_batchnorm", "pooling",
      forall("(a T) (c T) (ax Int) (s T) (b T) (m T) (v T) (e Real)",
             "(=> (and (>= ax 0) (not (= ax 1))) (= (BatchNorm (Concat a c ax) s b m v e) (Concat (BatchNorm a s b m v e) (BatchNorm c s b m v e) ax)))",
             {"(BatchNorm (Concat a c ax) s b m v e)", "(Concat (BatchNorm a s b m v e) (BatchNorm c s b m v e) ax)"}),
      "BatchNorm is element-wise per channel, so it commutes with Concat on any axis but the channel axis.");

  // ---- per-channel affine maps: Conv's bias, BatchNorm ----
  add("conv_add_bias", "per-channel",
      forall("(x T) (w T) (s L) (p L) (d L) (g Int) (b T)",
             "(=> (and (= (rank x) (rank w)) (>= (rank x) 3) (= (shape b) (cons (dim w 0) (ones (- (rank x) 2))))) "
             "(= (Add (Conv x w s p d g) b) (BiasAdd (Conv x w s p d g) (Reshape b (l1 (dim w 0))))))",
             {"(Add (Conv x w s p d g) b)"}),
      "Adding a [K, 1, ..., 1] tensor (one rank less than the output) to a convolution's output adds b[k] to output channel k: a bias. "
      "(Only with exactly rank - 1 dims: broadcasting aligns trailing dims, so another rank would line b up with other axes.)");
  add("conv_add_bias_rev", "per-channel",
      forall("(x T) (w T) (s L) (p L) (d L) (g Int) (b T) (r L)",
             "(=> (and (= (rank x) (rank w)) (>= (rank x) 3) (= r (l1 (dim w 0))) (= (shape b) (cons (dim w 0) (ones (- (rank x) 2))))) "
             "(= (BiasAdd (Conv x w s p d g) (Reshape b r)) (Add (Conv x w s p d g) b)))",
             {"(BiasAdd (Conv x w s p d g) (Reshape b r))"}),
      "The reverse of conv_add_bias.");
  add("biasadd_biasadd", "per-channel",
      forall("(y T) (b T) (c T)", "(=> (= (shape b) (shape c)) (= (BiasAdd (BiasAdd y b) c) (BiasAdd y (Add b c))))", {"(BiasAdd (BiasAdd y b) c)"}),
      "Two per-channel biases add up.");
  add("chmul_biasadd", "per-channel",
      forall("(y T) (b T) (k T)", "(=> (= (shape b) (shape k)) (= (ChMul (BiasAdd y b) k) (BiasAdd (ChMul y k) (Mul b k))))", {"(ChMul (BiasAdd y b) k)"}),
      "(y + b) k = yk + bk per channel.");
  add("biasadd_concat", "per-channel",
      forall("(y T) (z T) (b T) (c T) (ax Int) (bx Int)",
             "(=> (and (= ax 1) (= bx 0) (= (dim y 1) (dim b 0))) (= (BiasAdd (Concat y z ax) (Concat b c bx)) (Concat (BiasAdd y b) (BiasAdd z c) 1)))",
             {"(BiasAdd (Concat y z ax) (Concat b c bx))"}),
      "Biases of stacked channels are stacked biases.");
  add("biasadd_concat_rev", "per-channel",
      forall("(y T) (z T) (b T) (c T) (ax Int)",
             "(=> (and (= ax 1) (= (rank b) 1) (= (rank c) 1)) (= (Concat (BiasAdd y b) (BiasAdd z c) ax) (BiasAdd (Concat y z 1) (Concat b c 0))))",
             {"(Concat (BiasAdd y b) (BiasAdd z c) ax)"}),
      "The reverse of biasadd_concat.");
  add("batchnorm_affine", "per-channel",
      forall("(y T) (s T) (b T) (m T) (v T) (e Real)",
             "(=> (>= (rank y) 2) (let ((k (Div s (Sqrt (Add v (Const 0 nil 0 e)))))) (= (BatchNorm y s b m v e) (BiasAdd (ChMul y k) (Sub b (Mul m k))))))",
             {"(BatchNorm y s b m v e)"}),
      "Inference BatchNorm is (y - m) / sqrt(v + eps) * s + b per channel: y k + (b - m k) with k = s / sqrt(v + eps).");
  return ax;
}

}  // namespace

const std::vector<AxiomInfo>& axiom_table_impl() {
  static const std::vector<AxiomInfo> table = [] {
    std::vector<AxiomInfo> t;
    for (auto& a : build_axioms()) t.push_back({a.name, a.group, a.smt, a.why});
    return t;
  }();
  return table;
}

Signature::Signature(z3::context& c) : ctx_(c), T_(c.uninterpreted_sort("T")), L_(c) {
  Z3_func_decl nil, is_nil, cons, is_cons, head, tail;
  L_ = z3::sort(c, Z3_mk_list_sort(c, Z3_mk_string_symbol(c, "L"), c.int_sort(), &nil, &is_nil, &cons, &is_cons, &head, &tail));
  c.check_error();
  for (auto d : {nil, is_nil, cons, is_cons, head, tail}) keep_.emplace_back(c, d);
  nil_ = nil;
  cons_ = cons;
  for (const auto& f : kFunctions) {
    z3::sort_vector dom(c);
    auto sort_of = [&](char k) -> z3::sort {
      switch (k) {
        case 'T': return T_;
        case 'L': return L_;
        case 'I': return c.int_sort();
        default: return c.real_sort();
      }
    };
    for (const char* p = f.domain; *p; ++p) dom.push_back(sort_of(*p));
    fns_.emplace(f.name, c.function(f.name, dom, sort_of(f.range)));
  }
}

z3::func_decl Signature::fn(const std::string& name) const {
  auto it = fns_.find(name);
  if (it == fns_.end()) throw z3::exception(("prover: unknown function " + name).c_str());
  return it->second;
}

z3::expr Signature::apply(const std::string& name, const std::vector<z3::expr>& args) const {
  z3::expr_vector v(ctx_);
  for (const auto& a : args) v.push_back(a);
  return fn(name)(v);
}

z3::expr Signature::nil() const { return z3::expr(ctx_, Z3_mk_app(ctx_, nil_, 0, nullptr)); }

z3::expr Signature::cons(const z3::expr& head, const z3::expr& tail) const {
  Z3_ast args[2] = {head, tail};
  z3::expr e(ctx_, Z3_mk_app(ctx_, cons_, 2, args));
  ctx_.check_error();
  return e;
}

z3::expr Signature::list(const std::vector<z3::expr>& elems) const {
  z3::expr l = nil();
  for (size_t i = elems.size(); i-- > 0;) l = cons(elems[i], l);
  return l;
}

z3::expr_vector Signature::parse(const std::string& smt) const {
  std::vector<Z3_symbol> sort_names = {Z3_mk_string_symbol(ctx_, "T"), Z3_mk_string_symbol(ctx_, "L")};
  std::vector<Z3_sort> sorts = {T_, L_};
  std::vector<Z3_symbol> names;
  std::vector<Z3_func_decl> decls;
  for (const auto& [n, d] : fns_) {
    names.push_back(Z3_mk_string_symbol(ctx_, n.c_str()));
    decls.push_back(d);
  }
  const std::string text = std::string(kPreamble) + smt;
  Z3_ast_vector v = Z3_parse_smtlib2_string(ctx_, text.c_str(), static_cast<unsigned>(sorts.size()), sort_names.data(), sorts.data(),
                                            static_cast<unsigned>(decls.size()), names.data(), decls.data());
  if (Z3_get_error_code(ctx_) != Z3_OK || v == nullptr)
    throw z3::exception((std::string("prover: cannot parse axiom: ") + Z3_get_error_msg(ctx_, Z3_get_error_code(ctx_)) + ": " + smt).c_str());
  return z3::expr_vector(ctx_, v);
}

z3::expr_vector axioms(const Signature& sig) {
  z3::expr_vector all(sig.ctx());
  for (const auto& a : axiom_table_impl()) {
    auto parsed = sig.parse(a.smt);
    for (unsigned i = 0; i < parsed.size(); ++i) all.push_back(parsed[i]);
  }
  return all;
}

}  // namespace rlflow::rules::prover

namespace rlflow::rules {

const std::vector<AxiomInfo>& prover_axioms() { return prover::axiom_table_impl(); }

}  // namespace rlflow::rules
