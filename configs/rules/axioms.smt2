;; The axioms of rlflow's rule prover (`rlflow rules verify --prove`), in SMT-LIB 2.
;;
;; configs/rules/AXIOMS.md documents this file: its format, the vocabulary and the soundness
;; argument, and lists every axiom by group. The build embeds this file in the rlflow binary
;; (CMake re-reads it when it changes); the prover parses each axiom against the vocabulary of
;; src/rules/prover_axioms.cpp (sorts T and L, and the function symbols in kFunctions).
;;
;; Format: a ";; preamble" section of shared macros (define-fun), then one entry per axiom:
;;   ;; axiom: NAME          unique; also the quantifier's :qid, so Z3's statistics name it
;;   ;; group: GROUP         the section of AXIOMS.md it belongs to
;;   ;; why: TEXT            what it says and why it is sound (continued on ";;   " lines)
;;   (assert ...)           one or more SMT-LIB commands, on the lines that follow
;; Other ";;" lines are comments.

;; preamble
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
(define-fun chanflat4 ((b T) (x T)) Bool (and (= (rank x) 4) (= (rank b) 3) (or (= (dim b 0) (dim x 1)) (= (dim b 0) 1)) (= (dim b 1) 1) (= (dim b 2) 1)))
(define-fun same4 ((a T) (b T)) Bool (and (= (rank a) 4) (= (rank b) 4) (= (dim a 0) (dim b 0)) (= (dim a 1) (dim b 1)) (= (dim a 2) (dim b 2)) (= (dim a 3) (dim b 3))))
(define-fun l3 ((a Int) (b Int) (c Int)) L (cons a (cons b (cons c nil))))
(define-fun tperm ((r Int)) L (ite (= r 2) (l2 1 0) (l3 0 2 1)))
(define-fun flat_on ((b T) (a T) (ax Int)) Bool (and (>= (rank a) (rank b)) (<= 0 ax) (or (< ax (- (rank a) (rank b))) (= (dim b (- ax (- (rank a) (rank b)))) 1))))
(define-fun hwflat ((b T)) Bool (or (= (rank b) 0) (and (= (rank b) 1) (= (dim b 0) 1)) (and (>= (rank b) 2) (<= (rank b) 4) (= (dim b (- (rank b) 1)) 1) (= (dim b (- (rank b) 2)) 1))))

;; ---------------- encoding ----------------

;; axiom: act_none
;; group: encoding
;; why: Conv's fused activation code 0 (ir::Activation) is none applied after the convolution.
(assert (forall ((y T) (a Int)) (! (=> (= a 0) (= (Act a y) y)) :qid act_none :pattern ((Act a y)))))

;; axiom: act_relu
;; group: encoding
;; why: Conv's fused activation code 1 (ir::Activation) is relu applied after the convolution.
(assert (forall ((y T) (a Int)) (! (=> (= a 1) (= (Act a y) (Relu y))) :qid act_relu :pattern ((Act a y)))))

;; axiom: act_sigmoid
;; group: encoding
;; why: Conv's fused activation code 2 (ir::Activation) is sigmoid applied after the convolution.
(assert (forall ((y T) (a Int)) (! (=> (= a 2) (= (Act a y) (Sigmoid y))) :qid act_sigmoid :pattern ((Act a y)))))

;; axiom: act_tanh
;; group: encoding
;; why: Conv's fused activation code 3 (ir::Activation) is tanh applied after the convolution.
(assert (forall ((y T) (a Int)) (! (=> (= a 3) (= (Act a y) (Tanh y))) :qid act_tanh :pattern ((Act a y)))))

;; axiom: sub_def
;; group: encoding
;; why: x - y = x + (-1)y element-wise; SMul keeps y's shape, so both sides broadcast alike.
(assert (forall ((x T) (y T)) (! (= (Sub x y) (Add x (SMul y (- 1.0)))) :qid sub_def :pattern ((Sub x y)))))

;; ---------------- lists ----------------

;; axiom: len_nil
;; group: lists
;; why: Definition of len.
(assert (= (len nil) 0))

;; axiom: len_cons
;; group: lists
;; why: Definition of len.
(assert (forall ((h Int) (t L)) (! (= (len (cons h t)) (+ 1 (len t))) :qid len_cons :pattern ((len (cons h t))))))

;; axiom: len_nonneg
;; group: lists
;; why: Follows from the definition of len (induction).
(assert (forall ((l L)) (! (>= (len l) 0) :qid len_nonneg :pattern ((len l)))))

;; axiom: nth_cons
;; group: lists
;; why: Definition of nth by recursion on the list (nth of nil is left free).
(assert (forall ((h Int) (t L) (i Int)) (! (= (nth (cons h t) i) (ite (= i 0) h (nth t (- i 1)))) :qid nth_cons :pattern ((nth (cons h t) i)))))

;; axiom: permute_nil
;; group: lists
;; why: Definition of permute (permute(v, p)[i] = v[p[i]]).
(assert (forall ((v L)) (! (= (permute v nil) nil) :qid permute_nil :pattern ((permute v nil)))))

;; axiom: permute_cons
;; group: lists
;; why: Definition of permute.
(assert (forall ((v L) (i Int) (t L)) (! (= (permute v (cons i t)) (cons (nth v i) (permute v t))) :qid permute_cons :pattern ((permute v (cons i t))))))

;; axiom: permute_len
;; group: lists
;; why: Follows from the definition of permute.
(assert (forall ((v L) (p L)) (! (= (len (permute v p)) (len p)) :qid permute_len :pattern ((permute v p)))))

;; axiom: permute_nth
;; group: lists
;; why: Follows from the definition of permute (for indices in range only).
(assert (forall ((v L) (p L) (i Int)) (! (=> (and (<= 0 i) (< i (len p))) (= (nth (permute v p) i) (nth v (nth p i)))) :qid permute_nth :pattern ((nth (permute v p) i)))))

;; axiom: iota_small
;; group: lists
;; why: iota(n) = [0, 1, ..., n-1], spelled out for n <= 8 (ground facts).
(assert (and (= (iota 0) nil) (= (iota 1) (cons 0 nil)) (= (iota 2) (cons 0 (cons 1 nil))) (= (iota 3) (cons 0 (cons 1 (cons 2 nil)))) (= (iota 4) (cons 0 (cons 1 (cons 2 (cons 3 nil))))) (= (iota 5) (cons 0 (cons 1 (cons 2 (cons 3 (cons 4 nil)))))) (= (iota 6) (cons 0 (cons 1 (cons 2 (cons 3 (cons 4 (cons 5 nil))))))) (= (iota 7) (cons 0 (cons 1 (cons 2 (cons 3 (cons 4 (cons 5 (cons 6 nil)))))))) (= (iota 8) (cons 0 (cons 1 (cons 2 (cons 3 (cons 4 (cons 5 (cons 6 (cons 7 nil)))))))))))

;; axiom: iota_len
;; group: lists
;; why: Definition of iota.
(assert (forall ((n Int)) (! (=> (>= n 0) (= (len (iota n)) n)) :qid iota_len :pattern ((iota n)))))

;; axiom: iota_nth
;; group: lists
;; why: Definition of iota.
(assert (forall ((n Int) (i Int)) (! (=> (and (<= 0 i) (< i n)) (= (nth (iota n) i) i)) :qid iota_nth :pattern ((nth (iota n) i)))))

;; axiom: ones_small
;; group: lists
;; why: ones(n) = [1, ..., 1] (n entries), spelled out for n <= 8.
(assert (and (= (ones 0) nil) (= (ones 1) (cons 1 nil)) (= (ones 2) (cons 1 (cons 1 nil))) (= (ones 3) (cons 1 (cons 1 (cons 1 nil)))) (= (ones 4) (cons 1 (cons 1 (cons 1 (cons 1 nil))))) (= (ones 5) (cons 1 (cons 1 (cons 1 (cons 1 (cons 1 nil)))))) (= (ones 6) (cons 1 (cons 1 (cons 1 (cons 1 (cons 1 (cons 1 nil))))))) (= (ones 7) (cons 1 (cons 1 (cons 1 (cons 1 (cons 1 (cons 1 (cons 1 nil)))))))) (= (ones 8) (cons 1 (cons 1 (cons 1 (cons 1 (cons 1 (cons 1 (cons 1 (cons 1 nil)))))))))))

;; axiom: zeros_small
;; group: lists
;; why: zeros(n) = [0, ..., 0] (n entries), spelled out for n <= 8.
(assert (and (= (zeros 0) nil) (= (zeros 1) (cons 0 nil)) (= (zeros 2) (cons 0 (cons 0 nil))) (= (zeros 3) (cons 0 (cons 0 (cons 0 nil)))) (= (zeros 4) (cons 0 (cons 0 (cons 0 (cons 0 nil))))) (= (zeros 5) (cons 0 (cons 0 (cons 0 (cons 0 (cons 0 nil)))))) (= (zeros 6) (cons 0 (cons 0 (cons 0 (cons 0 (cons 0 (cons 0 nil))))))) (= (zeros 7) (cons 0 (cons 0 (cons 0 (cons 0 (cons 0 (cons 0 (cons 0 nil)))))))) (= (zeros 8) (cons 0 (cons 0 (cons 0 (cons 0 (cons 0 (cons 0 (cons 0 (cons 0 nil)))))))))))

;; axiom: lsum_nil
;; group: lists
;; why: Definition of the sum of a list.
(assert (= (lsum nil) 0))

;; axiom: lsum_cons
;; group: lists
;; why: Definition of the sum of a list.
(assert (forall ((h Int) (t L)) (! (= (lsum (cons h t)) (+ h (lsum t))) :qid lsum_cons :pattern ((lsum (cons h t))))))

;; axiom: lset_len
;; group: lists
;; why: lset(l, i, v) is l with entry i replaced by v.
(assert (forall ((l L) (i Int) (v Int)) (! (= (len (lset l i v)) (len l)) :qid lset_len :pattern ((lset l i v)))))

;; axiom: lset_nth
;; group: lists
;; why: lset(l, i, v) is l with entry i replaced by v (indices in range only).
(assert (forall ((l L) (i Int) (v Int) (j Int)) (! (=> (and (<= 0 j) (< j (len l))) (= (nth (lset l i v) j) (ite (= j i) v (nth l j)))) :qid lset_nth :pattern ((nth (lset l i v) j)))))

;; axiom: lappend_cons
;; group: lists
;; why: Definition of list concatenation.
(assert (forall ((h Int) (t L) (m L)) (! (= (lappend (cons h t) m) (cons h (lappend t m))) :qid lappend_cons :pattern ((lappend (cons h t) m)))))

;; axiom: lappend_nil
;; group: lists
;; why: Definition of list concatenation.
(assert (forall ((m L)) (! (= (lappend nil m) m) :qid lappend_nil :pattern ((lappend nil m)))))

;; axiom: lindex_cons
;; group: lists
;; why: Definition of the position of a value in a list.
(assert (forall ((h Int) (t L) (v Int)) (! (= (lindex (cons h t) v) (ite (= h v) 0 (+ 1 (lindex t v)))) :qid lindex_cons :pattern ((lindex (cons h t) v)))))

;; axiom: bshape_len
;; group: lists
;; why: Numpy broadcasting: the result has the larger rank.
(assert (forall ((p L) (q L)) (! (= (len (bshape p q)) (imax (len p) (len q))) :qid bshape_len :pattern ((bshape p q)))))

;; axiom: bshape_nth
;; group: lists
;; why: Numpy broadcasting aligns trailing dims; a dim of 1 (or a missing one) takes the other's extent.
;;   Right whenever the shapes broadcast.
(assert (forall ((p L) (q L) (i Int)) (! (let ((r (imax (len p) (len q)))) (=> (and (<= 0 i) (< i r)) (let ((a (ite (< i (- r (len p))) 1 (nth p (- i (- r (len p)))))) (b (ite (< i (- r (len q))) 1 (nth q (- i (- r (len q))))))) (= (nth (bshape p q) i) (ite (= a 1) b a))))) :qid bshape_nth :pattern ((nth (bshape p q) i)))))

;; ---------------- shapes ----------------

;; axiom: dims_nonneg
;; group: shapes
;; why: Extents are never negative.
(assert (forall ((t T) (i Int)) (! (=> (and (<= 0 i) (< i (rank t))) (>= (dim t i) 0)) :qid dims_nonneg :pattern ((dim t i)))))

;; axiom: shape_Relu
;; group: shapes
;; why: Relu keeps its (first) input's shape.
(assert (forall ((x T)) (! (= (shape (Relu x)) (shape x)) :qid shape_Relu :pattern ((shape (Relu x))))))

;; axiom: shape_Sigmoid
;; group: shapes
;; why: Sigmoid keeps its (first) input's shape.
(assert (forall ((x T)) (! (= (shape (Sigmoid x)) (shape x)) :qid shape_Sigmoid :pattern ((shape (Sigmoid x))))))

;; axiom: shape_Tanh
;; group: shapes
;; why: Tanh keeps its (first) input's shape.
(assert (forall ((x T)) (! (= (shape (Tanh x)) (shape x)) :qid shape_Tanh :pattern ((shape (Tanh x))))))

;; axiom: shape_Erf
;; group: shapes
;; why: Erf keeps its (first) input's shape.
(assert (forall ((x T)) (! (= (shape (Erf x)) (shape x)) :qid shape_Erf :pattern ((shape (Erf x))))))

;; axiom: shape_Sqrt
;; group: shapes
;; why: Sqrt keeps its (first) input's shape.
(assert (forall ((x T)) (! (= (shape (Sqrt x)) (shape x)) :qid shape_Sqrt :pattern ((shape (Sqrt x))))))

;; axiom: shape_Clip
;; group: shapes
;; why: Clip keeps its (first) input's shape.
(assert (forall ((x T) (a Real) (b Real)) (! (= (shape (Clip x a b)) (shape x)) :qid shape_Clip :pattern ((shape (Clip x a b))))))

;; axiom: shape_SMul
;; group: shapes
;; why: SMul keeps its (first) input's shape.
(assert (forall ((x T) (a Real)) (! (= (shape (SMul x a)) (shape x)) :qid shape_SMul :pattern ((shape (SMul x a))))))

;; axiom: shape_Cast
;; group: shapes
;; why: Cast keeps its (first) input's shape.
(assert (forall ((x T) (d Int)) (! (= (shape (Cast x d)) (shape x)) :qid shape_Cast :pattern ((shape (Cast x d))))))

;; axiom: shape_Act
;; group: shapes
;; why: Act keeps its (first) input's shape.
(assert (forall ((x T) (k Int)) (! (= (shape (Act k x)) (shape x)) :qid shape_Act :pattern ((shape (Act k x))))))

;; axiom: shape_BiasAdd
;; group: shapes
;; why: BiasAdd keeps its (first) input's shape.
(assert (forall ((x T) (b T)) (! (= (shape (BiasAdd x b)) (shape x)) :qid shape_BiasAdd :pattern ((shape (BiasAdd x b))))))

;; axiom: shape_ChMul
;; group: shapes
;; why: ChMul keeps its (first) input's shape.
(assert (forall ((x T) (b T)) (! (= (shape (ChMul x b)) (shape x)) :qid shape_ChMul :pattern ((shape (ChMul x b))))))

;; axiom: shape_BatchNorm
;; group: shapes
;; why: BatchNorm keeps its (first) input's shape.
(assert (forall ((x T) (s T) (b T) (m T) (v T) (e Real)) (! (= (shape (BatchNorm x s b m v e)) (shape x)) :qid shape_BatchNorm :pattern ((shape (BatchNorm x s b m v e))))))

;; axiom: shape_Softmax
;; group: shapes
;; why: Softmax keeps its (first) input's shape.
(assert (forall ((x T) (a Int)) (! (= (shape (Softmax x a)) (shape x)) :qid shape_Softmax :pattern ((shape (Softmax x a))))))

;; axiom: shape_LayerNorm
;; group: shapes
;; why: LayerNorm keeps its (first) input's shape.
(assert (forall ((x T) (s T) (a Int) (e Real)) (! (= (shape (LayerNorm x s a e)) (shape x)) :qid shape_LayerNorm :pattern ((shape (LayerNorm x s a e))))))

;; axiom: shape_LayerNorm3
;; group: shapes
;; why: LayerNorm3 keeps its (first) input's shape.
(assert (forall ((x T) (s T) (b T) (a Int) (e Real)) (! (= (shape (LayerNorm3 x s b a e)) (shape x)) :qid shape_LayerNorm3 :pattern ((shape (LayerNorm3 x s b a e))))))

;; axiom: shape_RMSNorm
;; group: shapes
;; why: RMSNorm keeps its (first) input's shape.
(assert (forall ((x T) (s T) (a Int) (e Real)) (! (= (shape (RMSNorm x s a e)) (shape x)) :qid shape_RMSNorm :pattern ((shape (RMSNorm x s a e))))))

;; axiom: shape_Attention
;; group: shapes
;; why: Attention is (B, Hq, S, Ev) for 4-D inputs, (B, S, Hq * Ev) for 3-D ones (Ev = V's head size).
(assert (forall ((q T) (k T) (v T) (c Int) (s Real) (h Int) (g Int)) (! (= (shape (Attention q k v c s h g)) (ite (= (rank q) 4) (l4 (dim q 0) (dim q 1) (dim q 2) (dim v 3)) (l3 (dim q 0) (dim q 1) (* h (div (dim v 2) g))))) :qid shape_Attention :pattern ((shape (Attention q k v c s h g))))))

;; axiom: shape_Attention4
;; group: shapes
;; why: Attention with a mask has the shape it has without one.
(assert (forall ((q T) (k T) (v T) (m T) (c Int) (s Real) (h Int) (g Int)) (! (= (shape (Attention4 q k v m c s h g)) (ite (= (rank q) 4) (l4 (dim q 0) (dim q 1) (dim q 2) (dim v 3)) (l3 (dim q 0) (dim q 1) (* h (div (dim v 2) g))))) :qid shape_Attention4 :pattern ((shape (Attention4 q k v m c s h g))))))

;; axiom: shape_Add
;; group: shapes
;; why: Add broadcasts its inputs' shapes (numpy rules).
(assert (forall ((a T) (b T)) (! (= (shape (Add a b)) (bshape (shape a) (shape b))) :qid shape_Add :pattern ((shape (Add a b))))))

;; axiom: shape_Sub
;; group: shapes
;; why: Sub broadcasts its inputs' shapes (numpy rules).
(assert (forall ((a T) (b T)) (! (= (shape (Sub a b)) (bshape (shape a) (shape b))) :qid shape_Sub :pattern ((shape (Sub a b))))))

;; axiom: shape_Mul
;; group: shapes
;; why: Mul broadcasts its inputs' shapes (numpy rules).
(assert (forall ((a T) (b T)) (! (= (shape (Mul a b)) (bshape (shape a) (shape b))) :qid shape_Mul :pattern ((shape (Mul a b))))))

;; axiom: shape_Div
;; group: shapes
;; why: Div broadcasts its inputs' shapes (numpy rules).
(assert (forall ((a T) (b T)) (! (= (shape (Div a b)) (bshape (shape a) (shape b))) :qid shape_Div :pattern ((shape (Div a b))))))

;; axiom: shape_Pow
;; group: shapes
;; why: Pow broadcasts its inputs' shapes (numpy rules).
(assert (forall ((a T) (b T)) (! (= (shape (Pow a b)) (bshape (shape a) (shape b))) :qid shape_Pow :pattern ((shape (Pow a b))))))

;; axiom: shape_matmul_len
;; group: shapes
;; why: MatMul of operands of rank >= 2 has the larger rank (batch dims broadcast).
(assert (forall ((a T) (b T)) (! (=> (and (>= (rank a) 2) (>= (rank b) 2)) (= (rank (MatMul a b)) (imax (rank a) (rank b)))) :qid shape_matmul_len :pattern ((shape (MatMul a b))))))

;; axiom: shape_matmul_nth
;; group: shapes
;; why: MatMul: [..., M, K] x [..., K, N] -> [broadcast batch..., M, N].
(assert (forall ((a T) (b T) (i Int)) (! (let ((ra (rank a)) (rb (rank b)) (r (imax (rank a) (rank b)))) (=> (and (>= ra 2) (>= rb 2) (<= 0 i) (< i r)) (= (dim (MatMul a b) i) (ite (= i (- r 1)) (dim b (- rb 1)) (ite (= i (- r 2)) (dim a (- ra 2)) (let ((p (ite (< i (- r ra)) 1 (dim a (- i (- r ra))))) (q (ite (< i (- r rb)) 1 (dim b (- i (- r rb)))))) (ite (= p 1) q p))))))) :qid shape_matmul_nth :pattern ((dim (MatMul a b) i)))))

;; axiom: shape_conv_len
;; group: shapes
;; why: Conv keeps the input's rank.
(assert (forall ((x T) (w T) (s L) (p L) (d L) (g Int)) (! (= (rank (Conv x w s p d g)) (rank x)) :qid shape_conv_len :pattern ((shape (Conv x w s p d g))))))

;; axiom: shape_conv_nth
;; group: shapes
;; why: Conv: [N, C, spatial...] with weights [K, C/g, kernel...] -> [N, K, window extents...].
(assert (forall ((x T) (w T) (s L) (p L) (d L) (g Int) (i Int)) (! (let ((n (- (rank x) 2))) (=> (and (<= 0 i) (< i (rank x))) (= (dim (Conv x w s p d g) i) (ite (= i 0) (dim x 0) (ite (= i 1) (dim w 0) (convout (dim x i) (dim w i) (nth s (- i 2)) (nth p (- i 2)) (nth p (+ (- i 2) n)) (nth d (- i 2)))))))) :qid shape_conv_nth :pattern ((dim (Conv x w s p d g) i)))))

;; axiom: shape_concat_len
;; group: shapes
;; why: Concat keeps the rank.
(assert (forall ((a T) (b T) (ax Int)) (! (= (rank (Concat a b ax)) (rank a)) :qid shape_concat_len :pattern ((shape (Concat a b ax))))))

;; axiom: shape_concat_nth
;; group: shapes
;; why: Concat adds the extents on its axis and keeps the others.
(assert (forall ((a T) (b T) (ax Int) (i Int)) (! (=> (and (<= 0 i) (< i (rank a))) (= (dim (Concat a b ax) i) (ite (= i ax) (+ (dim a ax) (dim b ax)) (dim a i)))) :qid shape_concat_nth :pattern ((dim (Concat a b ax) i)))))

;; axiom: shape_split
;; group: shapes
;; why: Output k of Split has extent sizes[k] on the axis.
(assert (forall ((x T) (ax Int) (sz L) (k Int)) (! (= (shape (Split x ax sz k)) (lset (shape x) ax (nth sz k))) :qid shape_split :pattern ((shape (Split x ax sz k))))))

;; axiom: shape_transpose
;; group: shapes
;; why: Transpose: out.shape[i] = in.shape[perm[i]].
(assert (forall ((x T) (p L)) (! (= (shape (Transpose x p)) (permute (shape x) p)) :qid shape_transpose :pattern ((shape (Transpose x p))))))

;; axiom: shape_reshape
;; group: shapes
;; why: Reshape's shape parameter is fully resolved.
(assert (forall ((x T) (s L)) (! (= (shape (Reshape x s)) s) :qid shape_reshape :pattern ((shape (Reshape x s))))))

;; axiom: shape_enlarge_len
;; group: shapes
;; why: Enlarge keeps the rank.
(assert (forall ((w T) (k L)) (! (= (rank (Enlarge w k)) (rank w)) :qid shape_enlarge_len :pattern ((shape (Enlarge w k))))))

;; axiom: shape_enlarge_nth
;; group: shapes
;; why: Enlarge sets the spatial extents to the kernel parameter.
(assert (forall ((w T) (k L) (i Int)) (! (=> (and (<= 0 i) (< i (rank w))) (= (dim (Enlarge w k) i) (ite (< i 2) (dim w i) (nth k (- i 2))))) :qid shape_enlarge_nth :pattern ((dim (Enlarge w k) i)))))

;; axiom: shape_const
;; group: shapes
;; why: A Constant has its shape parameter.
(assert (forall ((f Int) (s L) (d Int) (v Real)) (! (= (shape (Const f s d v)) s) :qid shape_const :pattern ((shape (Const f s d v))))))

;; axiom: shape_gap
;; group: shapes
;; why: GlobalAveragePool reduces the spatial dims to 1.
(assert (forall ((x T) (i Int)) (! (and (= (rank (GAP x)) (rank x)) (=> (and (<= 0 i) (< i (rank x))) (= (dim (GAP x) i) (ite (< i 2) (dim x i) 1)))) :qid shape_gap :pattern ((dim (GAP x) i)))))

;; ---------------- arithmetic ----------------

;; axiom: add_comm
;; group: arithmetic
;; why: Addition commutes (broadcasting is symmetric).
(assert (forall ((x T) (y T)) (! (= (Add x y) (Add y x)) :qid add_comm :pattern ((Add x y)))))

;; axiom: add_assoc
;; group: arithmetic
;; why: Addition is associative; broadcasting is associative too.
(assert (forall ((x T) (y T) (z T)) (! (= (Add (Add x y) z) (Add x (Add y z))) :qid add_assoc :pattern ((Add (Add x y) z)) :pattern ((Add x (Add y z))))))

;; axiom: mul_comm
;; group: arithmetic
;; why: Multiplication commutes.
(assert (forall ((x T) (y T)) (! (= (Mul x y) (Mul y x)) :qid mul_comm :pattern ((Mul x y)))))

;; axiom: mul_assoc
;; group: arithmetic
;; why: Multiplication is associative.
(assert (forall ((x T) (y T) (z T)) (! (= (Mul (Mul x y) z) (Mul x (Mul y z))) :qid mul_assoc :pattern ((Mul (Mul x y) z)) :pattern ((Mul x (Mul y z))))))

;; axiom: mul_add_distrib
;; group: arithmetic
;; why: Multiplication distributes over addition; if one side broadcasts, so does the other.
(assert (forall ((x T) (y T) (z T)) (! (= (Mul (Add x y) z) (Add (Mul x z) (Mul y z))) :qid mul_add_distrib :pattern ((Mul (Add x y) z)) :pattern ((Add (Mul x z) (Mul y z))))))

;; axiom: smul_smul
;; group: arithmetic
;; why: (xa)b = x(ab).
(assert (forall ((x T) (a Real) (b Real)) (! (= (SMul (SMul x a) b) (SMul x (* a b))) :qid smul_smul :pattern ((SMul (SMul x a) b)))))

;; axiom: smul_add
;; group: arithmetic
;; why: Scalar multiplication distributes over addition.
(assert (forall ((x T) (y T) (a Real)) (! (= (SMul (Add x y) a) (Add (SMul x a) (SMul y a))) :qid smul_add :pattern ((SMul (Add x y) a)) :pattern ((Add (SMul x a) (SMul y a))))))

;; axiom: smul_mul
;; group: arithmetic
;; why: (xy)a = (xa)y element-wise.
(assert (forall ((x T) (y T) (a Real)) (! (= (SMul (Mul x y) a) (Mul (SMul x a) y)) :qid smul_mul :pattern ((SMul (Mul x y) a)) :pattern ((Mul (SMul x a) y)))))

;; axiom: smul_one
;; group: arithmetic
;; why: x * 1 = x.
(assert (forall ((x T) (a Real)) (! (=> (= a 1.0) (= (SMul x a) x)) :qid smul_one :pattern ((SMul x a)))))

;; axiom: add_self
;; group: arithmetic
;; why: x + x = 2x.
(assert (forall ((x T)) (! (= (Add x x) (SMul x 2.0)) :qid add_self :pattern ((Add x x)))))

;; axiom: smul_add_same
;; group: arithmetic
;; why: ax + bx = (a + b)x.
(assert (forall ((x T) (a Real) (b Real)) (! (= (Add (SMul x a) (SMul x b)) (SMul x (+ a b))) :qid smul_add_same :pattern ((Add (SMul x a) (SMul x b))))))

;; axiom: smul_add_self
;; group: arithmetic
;; why: ax + x = (a + 1)x.
(assert (forall ((x T) (a Real)) (! (= (Add (SMul x a) x) (SMul x (+ a 1.0))) :qid smul_add_self :pattern ((Add (SMul x a) x)))))

;; axiom: mul_ones
;; group: arithmetic
;; why: Multiplying by ones that broadcast into x without enlarging it (a scalar, x's own shape, or [C,
;;   1, ..., 1]) changes nothing.
(assert (forall ((x T) (f Int) (sh L) (dt Int) (v Real)) (! (=> (and (= f 0) (= v 1.0) (or (= sh nil) (= sh (shape x)) (= sh (cons (dim x 1) (ones (- (rank x) 2)))))) (= (Mul x (Const f sh dt v)) x)) :qid mul_ones :pattern ((Mul x (Const f sh dt v))))))

;; axiom: add_zeros
;; group: arithmetic
;; why: Adding zeros that broadcast into x without enlarging it changes nothing.
(assert (forall ((x T) (f Int) (sh L) (dt Int) (v Real)) (! (=> (and (= f 0) (= v 0.0) (or (= sh nil) (= sh (shape x)) (= sh (cons (dim x 1) (ones (- (rank x) 2)))))) (= (Add x (Const f sh dt v)) x)) :qid add_zeros :pattern ((Add x (Const f sh dt v))))))

;; axiom: smul_as_mul
;; group: arithmetic
;; why: Multiplying by a rank-0 constant tensor of value v is scalar multiplication by v.
(assert (forall ((x T) (f Int) (s L) (d Int) (v Real)) (! (=> (and (= f 0) (= s nil)) (= (Mul x (Const f s d v)) (SMul x v))) :qid smul_as_mul :pattern ((Mul x (Const f s d v))))))

;; axiom: div_rank0
;; group: arithmetic
;; why: Dividing by a rank-0 tensor of value v is scalar multiplication by 1/v (reals; a zero divisor is
;;   not modelled, as everywhere in this theory).
(assert (forall ((x T) (c T)) (! (=> (= (rank c) 0) (= (Div x c) (SMul x (/ 1.0 (SVal c))))) :qid div_rank0 :pattern ((Div x c)))))

;; axiom: mul_rank0
;; group: arithmetic
;; why: Multiplying by a rank-0 tensor of value v is scalar multiplication by v.
(assert (forall ((x T) (c T)) (! (=> (= (rank c) 0) (= (Mul x c) (SMul x (SVal c)))) :qid mul_rank0 :pattern ((Mul x c)))))

;; ---------------- activations ----------------

;; axiom: relu_idem
;; group: activations
;; why: relu(relu(x)) = relu(x).
(assert (forall ((x T)) (! (= (Relu (Relu x)) (Relu x)) :qid relu_idem :pattern ((Relu (Relu x))))))

;; axiom: relu_smul_nonneg
;; group: activations
;; why: max(ax, 0) = a max(x, 0) for a >= 0.
(assert (forall ((x T) (a Real)) (! (=> (>= a 0.0) (= (Relu (SMul x a)) (SMul (Relu x) a))) :qid relu_smul_nonneg :pattern ((Relu (SMul x a))) :pattern ((SMul (Relu x) a)))))

;; axiom: relu_maxpool
;; group: activations
;; why: relu is monotone, so it commutes with max; every pooling window holds at least one input element
;;   (pads < kernel).
(assert (forall ((x T) (k L) (s L) (p L) (c Int) (i Int)) (! (= (Relu (MaxPool x k s p c i)) (MaxPool (Relu x) k s p c i)) :qid relu_maxpool :pattern ((Relu (MaxPool x k s p c i))) :pattern ((MaxPool (Relu x) k s p c i)))))

;; ---------------- element-wise ----------------

;; axiom: concat_Relu
;; group: element-wise
;; why: Relu is element-wise, so it commutes with Concat (it keeps shapes, so both sides are well-formed
;;   together).
(assert (forall ((a T) (c T) (ax Int)) (! (= (Relu (Concat a c ax)) (Concat (Relu a) (Relu c) ax)) :qid concat_Relu :pattern ((Relu (Concat a c ax))) :pattern ((Concat (Relu a) (Relu c) ax)))))

;; axiom: split_Relu
;; group: element-wise
;; why: Relu is element-wise, so it commutes with Split.
(assert (forall ((x T) (ax Int) (sz L) (j Int)) (! (= (Relu (Split x ax sz j)) (Split (Relu x) ax sz j)) :qid split_Relu :pattern ((Relu (Split x ax sz j))) :pattern ((Split (Relu x) ax sz j)))))

;; axiom: transpose_Relu
;; group: element-wise
;; why: Relu is element-wise, so it commutes with Transpose.
(assert (forall ((x T) (p L)) (! (= (Relu (Transpose x p)) (Transpose (Relu x) p)) :qid transpose_Relu :pattern ((Relu (Transpose x p))) :pattern ((Transpose (Relu x) p)))))

;; axiom: reshape_Relu
;; group: element-wise
;; why: Relu is element-wise, so it commutes with Reshape (row-major order is kept).
(assert (forall ((x T) (s L)) (! (= (Relu (Reshape x s)) (Reshape (Relu x) s)) :qid reshape_Relu :pattern ((Relu (Reshape x s))) :pattern ((Reshape (Relu x) s)))))

;; axiom: concat_Sigmoid
;; group: element-wise
;; why: Sigmoid is element-wise, so it commutes with Concat (it keeps shapes, so both sides are well-
;;   formed together).
(assert (forall ((a T) (c T) (ax Int)) (! (= (Sigmoid (Concat a c ax)) (Concat (Sigmoid a) (Sigmoid c) ax)) :qid concat_Sigmoid :pattern ((Sigmoid (Concat a c ax))) :pattern ((Concat (Sigmoid a) (Sigmoid c) ax)))))

;; axiom: split_Sigmoid
;; group: element-wise
;; why: Sigmoid is element-wise, so it commutes with Split.
(assert (forall ((x T) (ax Int) (sz L) (j Int)) (! (= (Sigmoid (Split x ax sz j)) (Split (Sigmoid x) ax sz j)) :qid split_Sigmoid :pattern ((Sigmoid (Split x ax sz j))) :pattern ((Split (Sigmoid x) ax sz j)))))

;; axiom: transpose_Sigmoid
;; group: element-wise
;; why: Sigmoid is element-wise, so it commutes with Transpose.
(assert (forall ((x T) (p L)) (! (= (Sigmoid (Transpose x p)) (Transpose (Sigmoid x) p)) :qid transpose_Sigmoid :pattern ((Sigmoid (Transpose x p))) :pattern ((Transpose (Sigmoid x) p)))))

;; axiom: reshape_Sigmoid
;; group: element-wise
;; why: Sigmoid is element-wise, so it commutes with Reshape (row-major order is kept).
(assert (forall ((x T) (s L)) (! (= (Sigmoid (Reshape x s)) (Reshape (Sigmoid x) s)) :qid reshape_Sigmoid :pattern ((Sigmoid (Reshape x s))) :pattern ((Reshape (Sigmoid x) s)))))

;; axiom: concat_Tanh
;; group: element-wise
;; why: Tanh is element-wise, so it commutes with Concat (it keeps shapes, so both sides are well-formed
;;   together).
(assert (forall ((a T) (c T) (ax Int)) (! (= (Tanh (Concat a c ax)) (Concat (Tanh a) (Tanh c) ax)) :qid concat_Tanh :pattern ((Tanh (Concat a c ax))) :pattern ((Concat (Tanh a) (Tanh c) ax)))))

;; axiom: split_Tanh
;; group: element-wise
;; why: Tanh is element-wise, so it commutes with Split.
(assert (forall ((x T) (ax Int) (sz L) (j Int)) (! (= (Tanh (Split x ax sz j)) (Split (Tanh x) ax sz j)) :qid split_Tanh :pattern ((Tanh (Split x ax sz j))) :pattern ((Split (Tanh x) ax sz j)))))

;; axiom: transpose_Tanh
;; group: element-wise
;; why: Tanh is element-wise, so it commutes with Transpose.
(assert (forall ((x T) (p L)) (! (= (Tanh (Transpose x p)) (Transpose (Tanh x) p)) :qid transpose_Tanh :pattern ((Tanh (Transpose x p))) :pattern ((Transpose (Tanh x) p)))))

;; axiom: reshape_Tanh
;; group: element-wise
;; why: Tanh is element-wise, so it commutes with Reshape (row-major order is kept).
(assert (forall ((x T) (s L)) (! (= (Tanh (Reshape x s)) (Reshape (Tanh x) s)) :qid reshape_Tanh :pattern ((Tanh (Reshape x s))) :pattern ((Reshape (Tanh x) s)))))

;; axiom: concat_Erf
;; group: element-wise
;; why: Erf is element-wise, so it commutes with Concat (it keeps shapes, so both sides are well-formed
;;   together).
(assert (forall ((a T) (c T) (ax Int)) (! (= (Erf (Concat a c ax)) (Concat (Erf a) (Erf c) ax)) :qid concat_Erf :pattern ((Erf (Concat a c ax))) :pattern ((Concat (Erf a) (Erf c) ax)))))

;; axiom: split_Erf
;; group: element-wise
;; why: Erf is element-wise, so it commutes with Split.
(assert (forall ((x T) (ax Int) (sz L) (j Int)) (! (= (Erf (Split x ax sz j)) (Split (Erf x) ax sz j)) :qid split_Erf :pattern ((Erf (Split x ax sz j))) :pattern ((Split (Erf x) ax sz j)))))

;; axiom: transpose_Erf
;; group: element-wise
;; why: Erf is element-wise, so it commutes with Transpose.
(assert (forall ((x T) (p L)) (! (= (Erf (Transpose x p)) (Transpose (Erf x) p)) :qid transpose_Erf :pattern ((Erf (Transpose x p))) :pattern ((Transpose (Erf x) p)))))

;; axiom: reshape_Erf
;; group: element-wise
;; why: Erf is element-wise, so it commutes with Reshape (row-major order is kept).
(assert (forall ((x T) (s L)) (! (= (Erf (Reshape x s)) (Reshape (Erf x) s)) :qid reshape_Erf :pattern ((Erf (Reshape x s))) :pattern ((Reshape (Erf x) s)))))

;; axiom: concat_Sqrt
;; group: element-wise
;; why: Sqrt is element-wise, so it commutes with Concat (it keeps shapes, so both sides are well-formed
;;   together).
(assert (forall ((a T) (c T) (ax Int)) (! (= (Sqrt (Concat a c ax)) (Concat (Sqrt a) (Sqrt c) ax)) :qid concat_Sqrt :pattern ((Sqrt (Concat a c ax))) :pattern ((Concat (Sqrt a) (Sqrt c) ax)))))

;; axiom: split_Sqrt
;; group: element-wise
;; why: Sqrt is element-wise, so it commutes with Split.
(assert (forall ((x T) (ax Int) (sz L) (j Int)) (! (= (Sqrt (Split x ax sz j)) (Split (Sqrt x) ax sz j)) :qid split_Sqrt :pattern ((Sqrt (Split x ax sz j))) :pattern ((Split (Sqrt x) ax sz j)))))

;; axiom: transpose_Sqrt
;; group: element-wise
;; why: Sqrt is element-wise, so it commutes with Transpose.
(assert (forall ((x T) (p L)) (! (= (Sqrt (Transpose x p)) (Transpose (Sqrt x) p)) :qid transpose_Sqrt :pattern ((Sqrt (Transpose x p))) :pattern ((Transpose (Sqrt x) p)))))

;; axiom: reshape_Sqrt
;; group: element-wise
;; why: Sqrt is element-wise, so it commutes with Reshape (row-major order is kept).
(assert (forall ((x T) (s L)) (! (= (Sqrt (Reshape x s)) (Reshape (Sqrt x) s)) :qid reshape_Sqrt :pattern ((Sqrt (Reshape x s))) :pattern ((Reshape (Sqrt x) s)))))

;; axiom: concat_SMul
;; group: element-wise
;; why: SMul is element-wise, so it commutes with Concat (it keeps shapes, so both sides are well-formed
;;   together).
(assert (forall ((a T) (c T) (ax Int) (u Real)) (! (= (SMul (Concat a c ax) u) (Concat (SMul a u) (SMul c u) ax)) :qid concat_SMul :pattern ((SMul (Concat a c ax) u)) :pattern ((Concat (SMul a u) (SMul c u) ax)))))

;; axiom: split_SMul
;; group: element-wise
;; why: SMul is element-wise, so it commutes with Split.
(assert (forall ((x T) (ax Int) (sz L) (j Int) (u Real)) (! (= (SMul (Split x ax sz j) u) (Split (SMul x u) ax sz j)) :qid split_SMul :pattern ((SMul (Split x ax sz j) u)) :pattern ((Split (SMul x u) ax sz j)))))

;; axiom: transpose_SMul
;; group: element-wise
;; why: SMul is element-wise, so it commutes with Transpose.
(assert (forall ((x T) (p L) (u Real)) (! (= (SMul (Transpose x p) u) (Transpose (SMul x u) p)) :qid transpose_SMul :pattern ((SMul (Transpose x p) u)) :pattern ((Transpose (SMul x u) p)))))

;; axiom: reshape_SMul
;; group: element-wise
;; why: SMul is element-wise, so it commutes with Reshape (row-major order is kept).
(assert (forall ((x T) (s L) (u Real)) (! (= (SMul (Reshape x s) u) (Reshape (SMul x u) s)) :qid reshape_SMul :pattern ((SMul (Reshape x s) u)) :pattern ((Reshape (SMul x u) s)))))

;; axiom: concat_Clip
;; group: element-wise
;; why: Clip is element-wise, so it commutes with Concat (it keeps shapes, so both sides are well-formed
;;   together).
(assert (forall ((a T) (c T) (ax Int) (lo Real) (hi Real)) (! (= (Clip (Concat a c ax) lo hi) (Concat (Clip a lo hi) (Clip c lo hi) ax)) :qid concat_Clip :pattern ((Clip (Concat a c ax) lo hi)) :pattern ((Concat (Clip a lo hi) (Clip c lo hi) ax)))))

;; axiom: split_Clip
;; group: element-wise
;; why: Clip is element-wise, so it commutes with Split.
(assert (forall ((x T) (ax Int) (sz L) (j Int) (lo Real) (hi Real)) (! (= (Clip (Split x ax sz j) lo hi) (Split (Clip x lo hi) ax sz j)) :qid split_Clip :pattern ((Clip (Split x ax sz j) lo hi)) :pattern ((Split (Clip x lo hi) ax sz j)))))

;; axiom: transpose_Clip
;; group: element-wise
;; why: Clip is element-wise, so it commutes with Transpose.
(assert (forall ((x T) (p L) (lo Real) (hi Real)) (! (= (Clip (Transpose x p) lo hi) (Transpose (Clip x lo hi) p)) :qid transpose_Clip :pattern ((Clip (Transpose x p) lo hi)) :pattern ((Transpose (Clip x lo hi) p)))))

;; axiom: reshape_Clip
;; group: element-wise
;; why: Clip is element-wise, so it commutes with Reshape (row-major order is kept).
(assert (forall ((x T) (s L) (lo Real) (hi Real)) (! (= (Clip (Reshape x s) lo hi) (Reshape (Clip x lo hi) s)) :qid reshape_Clip :pattern ((Clip (Reshape x s) lo hi)) :pattern ((Reshape (Clip x lo hi) s)))))

;; axiom: concat_Act
;; group: element-wise
;; why: Act is element-wise, so it commutes with Concat (it keeps shapes, so both sides are well-formed
;;   together).
(assert (forall ((a T) (c T) (ax Int) (k Int)) (! (= (Act k (Concat a c ax)) (Concat (Act k a) (Act k c) ax)) :qid concat_Act :pattern ((Act k (Concat a c ax))) :pattern ((Concat (Act k a) (Act k c) ax)))))

;; axiom: split_Act
;; group: element-wise
;; why: Act is element-wise, so it commutes with Split.
(assert (forall ((x T) (ax Int) (sz L) (j Int) (k Int)) (! (= (Act k (Split x ax sz j)) (Split (Act k x) ax sz j)) :qid split_Act :pattern ((Act k (Split x ax sz j))) :pattern ((Split (Act k x) ax sz j)))))

;; axiom: transpose_Act
;; group: element-wise
;; why: Act is element-wise, so it commutes with Transpose.
(assert (forall ((x T) (p L) (k Int)) (! (= (Act k (Transpose x p)) (Transpose (Act k x) p)) :qid transpose_Act :pattern ((Act k (Transpose x p))) :pattern ((Transpose (Act k x) p)))))

;; axiom: reshape_Act
;; group: element-wise
;; why: Act is element-wise, so it commutes with Reshape (row-major order is kept).
(assert (forall ((x T) (s L) (k Int)) (! (= (Act k (Reshape x s)) (Reshape (Act k x) s)) :qid reshape_Act :pattern ((Act k (Reshape x s))) :pattern ((Reshape (Act k x) s)))))

;; axiom: concat_Add
;; group: element-wise
;; why: Add of two Concats whose axes line up (counted from the right, as broadcasting aligns dims) and
;;   whose pieces have equal extents on that axis is the Concat of the pieces' Adds; off-axis dims
;;   may still broadcast.
(assert (forall ((a T) (b T) (c T) (d T) (ax Int) (axc Int)) (! (=> (and (<= 0 axc) (<= 0 ax) (= (- (rank a) ax) (- (rank c) axc)) (= (dim a ax) (dim c axc)) (= (dim b ax) (dim d axc))) (= (Add (Concat a b ax) (Concat c d axc)) (Concat (Add a c) (Add b d) (ite (>= (rank a) (rank c)) ax axc)))) :qid concat_Add :pattern ((Add (Concat a b ax) (Concat c d axc))))))

;; axiom: concat_Add_rev
;; group: element-wise
;; why: The reverse of concat_Add for operands of equal shapes (so the Concats it creates are well-
;;   formed).
(assert (forall ((a T) (b T) (c T) (d T) (ax Int)) (! (=> (and (= (shape a) (shape c)) (= (shape b) (shape d))) (= (Concat (Add a c) (Add b d) ax) (Add (Concat a b ax) (Concat c d ax)))) :qid concat_Add_rev :pattern ((Concat (Add a c) (Add b d) ax)))))

;; axiom: transpose_Add
;; group: element-wise
;; why: Add of equally transposed operands of equal rank is the transposed Add.
(assert (forall ((a T) (b T) (p L) (q L)) (! (=> (and (= p q) (= (rank a) (rank b)) (= (len p) (rank a))) (= (Add (Transpose a p) (Transpose b q)) (Transpose (Add a b) p))) :qid transpose_Add :pattern ((Add (Transpose a p) (Transpose b q))))))

;; axiom: transpose_Add_rev
;; group: element-wise
;; why: The reverse of transpose_Add.
(assert (forall ((a T) (b T) (p L)) (! (=> (and (= (rank a) (rank b)) (= (len p) (rank a))) (= (Transpose (Add a b) p) (Add (Transpose a p) (Transpose b p)))) :qid transpose_Add_rev :pattern ((Transpose (Add a b) p)))))

;; axiom: split_Add
;; group: element-wise
;; why: Add of the same piece of two equally shaped tensors is that piece of their Add.
(assert (forall ((x T) (y T) (ax Int) (sz L) (k Int) (ay Int) (sy L) (ky Int)) (! (=> (and (= ax ay) (= sz sy) (= k ky) (= (shape x) (shape y))) (= (Add (Split x ax sz k) (Split y ay sy ky)) (Split (Add x y) ax sz k))) :qid split_Add :pattern ((Add (Split x ax sz k) (Split y ay sy ky))))))

;; axiom: split_Add_rev
;; group: element-wise
;; why: The reverse of split_Add.
(assert (forall ((x T) (y T) (ax Int) (sz L) (k Int)) (! (=> (= (shape x) (shape y)) (= (Split (Add x y) ax sz k) (Add (Split x ax sz k) (Split y ax sz k)))) :qid split_Add_rev :pattern ((Split (Add x y) ax sz k)))))

;; axiom: concat_bcast_Add
;; group: element-wise
;; why: Add of a Concat and an operand that is constant along the Concat's axis (extent 1 there, or no
;;   such axis): apply it to each piece.
(assert (forall ((a T) (c T) (b T) (ax Int)) (! (=> (flat_on b a ax) (= (Add (Concat a c ax) b) (Concat (Add a b) (Add c b) ax))) :qid concat_bcast_Add :pattern ((Add (Concat a c ax) b)))))

;; axiom: concat_bcast_Add_r
;; group: element-wise
;; why: concat_bcast_Add with the Concat as the second operand.
(assert (forall ((a T) (c T) (b T) (ax Int)) (! (=> (flat_on b a ax) (= (Add b (Concat a c ax)) (Concat (Add b a) (Add b c) ax))) :qid concat_bcast_Add_r :pattern ((Add b (Concat a c ax))))))

;; axiom: concat_bcast_Add_rev
;; group: element-wise
;; why: The reverse of concat_bcast_Add for pieces of equal shape.
(assert (forall ((a T) (c T) (b T) (ax Int)) (! (=> (and (flat_on b a ax) (= (shape a) (shape c))) (= (Concat (Add a b) (Add c b) ax) (Add (Concat a c ax) b))) :qid concat_bcast_Add_rev :pattern ((Concat (Add a b) (Add c b) ax)))))

;; axiom: concat_bcast_Add_r_rev
;; group: element-wise
;; why: The reverse of concat_bcast_Add_r.
(assert (forall ((a T) (c T) (b T) (ax Int)) (! (=> (and (flat_on b a ax) (= (shape a) (shape c))) (= (Concat (Add b a) (Add b c) ax) (Add b (Concat a c ax)))) :qid concat_bcast_Add_r_rev :pattern ((Concat (Add b a) (Add b c) ax)))))

;; axiom: transpose_hw_bcast_Add
;; group: element-wise
;; why: Swapping the last two axes commutes with Add by an operand whose last two dims are 1 (or
;;   missing): it is the same along both.
(assert (forall ((x T) (b T) (q L)) (! (=> (and (hwperm q) (= (rank x) 4) (hwflat b)) (= (Add (Transpose x q) b) (Transpose (Add x b) q))) :qid transpose_hw_bcast_Add :pattern ((Add (Transpose x q) b)) :pattern ((Transpose (Add x b) q)))))

;; axiom: transpose_hw_bcast_Add_r
;; group: element-wise
;; why: transpose_hw_bcast_Add with the transposed tensor as the second operand.
(assert (forall ((x T) (b T) (q L)) (! (=> (and (hwperm q) (= (rank x) 4) (hwflat b)) (= (Add b (Transpose x q)) (Transpose (Add b x) q))) :qid transpose_hw_bcast_Add_r :pattern ((Add b (Transpose x q))) :pattern ((Transpose (Add b x) q)))))

;; axiom: concat_Mul
;; group: element-wise
;; why: Mul of two Concats whose axes line up (counted from the right, as broadcasting aligns dims) and
;;   whose pieces have equal extents on that axis is the Concat of the pieces' Muls; off-axis dims
;;   may still broadcast.
(assert (forall ((a T) (b T) (c T) (d T) (ax Int) (axc Int)) (! (=> (and (<= 0 axc) (<= 0 ax) (= (- (rank a) ax) (- (rank c) axc)) (= (dim a ax) (dim c axc)) (= (dim b ax) (dim d axc))) (= (Mul (Concat a b ax) (Concat c d axc)) (Concat (Mul a c) (Mul b d) (ite (>= (rank a) (rank c)) ax axc)))) :qid concat_Mul :pattern ((Mul (Concat a b ax) (Concat c d axc))))))

;; axiom: concat_Mul_rev
;; group: element-wise
;; why: The reverse of concat_Mul for operands of equal shapes (so the Concats it creates are well-
;;   formed).
(assert (forall ((a T) (b T) (c T) (d T) (ax Int)) (! (=> (and (= (shape a) (shape c)) (= (shape b) (shape d))) (= (Concat (Mul a c) (Mul b d) ax) (Mul (Concat a b ax) (Concat c d ax)))) :qid concat_Mul_rev :pattern ((Concat (Mul a c) (Mul b d) ax)))))

;; axiom: transpose_Mul
;; group: element-wise
;; why: Mul of equally transposed operands of equal rank is the transposed Mul.
(assert (forall ((a T) (b T) (p L) (q L)) (! (=> (and (= p q) (= (rank a) (rank b)) (= (len p) (rank a))) (= (Mul (Transpose a p) (Transpose b q)) (Transpose (Mul a b) p))) :qid transpose_Mul :pattern ((Mul (Transpose a p) (Transpose b q))))))

;; axiom: transpose_Mul_rev
;; group: element-wise
;; why: The reverse of transpose_Mul.
(assert (forall ((a T) (b T) (p L)) (! (=> (and (= (rank a) (rank b)) (= (len p) (rank a))) (= (Transpose (Mul a b) p) (Mul (Transpose a p) (Transpose b p)))) :qid transpose_Mul_rev :pattern ((Transpose (Mul a b) p)))))

;; axiom: split_Mul
;; group: element-wise
;; why: Mul of the same piece of two equally shaped tensors is that piece of their Mul.
(assert (forall ((x T) (y T) (ax Int) (sz L) (k Int) (ay Int) (sy L) (ky Int)) (! (=> (and (= ax ay) (= sz sy) (= k ky) (= (shape x) (shape y))) (= (Mul (Split x ax sz k) (Split y ay sy ky)) (Split (Mul x y) ax sz k))) :qid split_Mul :pattern ((Mul (Split x ax sz k) (Split y ay sy ky))))))

;; axiom: split_Mul_rev
;; group: element-wise
;; why: The reverse of split_Mul.
(assert (forall ((x T) (y T) (ax Int) (sz L) (k Int)) (! (=> (= (shape x) (shape y)) (= (Split (Mul x y) ax sz k) (Mul (Split x ax sz k) (Split y ax sz k)))) :qid split_Mul_rev :pattern ((Split (Mul x y) ax sz k)))))

;; axiom: concat_bcast_Mul
;; group: element-wise
;; why: Mul of a Concat and an operand that is constant along the Concat's axis (extent 1 there, or no
;;   such axis): apply it to each piece.
(assert (forall ((a T) (c T) (b T) (ax Int)) (! (=> (flat_on b a ax) (= (Mul (Concat a c ax) b) (Concat (Mul a b) (Mul c b) ax))) :qid concat_bcast_Mul :pattern ((Mul (Concat a c ax) b)))))

;; axiom: concat_bcast_Mul_r
;; group: element-wise
;; why: concat_bcast_Mul with the Concat as the second operand.
(assert (forall ((a T) (c T) (b T) (ax Int)) (! (=> (flat_on b a ax) (= (Mul b (Concat a c ax)) (Concat (Mul b a) (Mul b c) ax))) :qid concat_bcast_Mul_r :pattern ((Mul b (Concat a c ax))))))

;; axiom: concat_bcast_Mul_rev
;; group: element-wise
;; why: The reverse of concat_bcast_Mul for pieces of equal shape.
(assert (forall ((a T) (c T) (b T) (ax Int)) (! (=> (and (flat_on b a ax) (= (shape a) (shape c))) (= (Concat (Mul a b) (Mul c b) ax) (Mul (Concat a c ax) b))) :qid concat_bcast_Mul_rev :pattern ((Concat (Mul a b) (Mul c b) ax)))))

;; axiom: concat_bcast_Mul_r_rev
;; group: element-wise
;; why: The reverse of concat_bcast_Mul_r.
(assert (forall ((a T) (c T) (b T) (ax Int)) (! (=> (and (flat_on b a ax) (= (shape a) (shape c))) (= (Concat (Mul b a) (Mul b c) ax) (Mul b (Concat a c ax)))) :qid concat_bcast_Mul_r_rev :pattern ((Concat (Mul b a) (Mul b c) ax)))))

;; axiom: transpose_hw_bcast_Mul
;; group: element-wise
;; why: Swapping the last two axes commutes with Mul by an operand whose last two dims are 1 (or
;;   missing): it is the same along both.
(assert (forall ((x T) (b T) (q L)) (! (=> (and (hwperm q) (= (rank x) 4) (hwflat b)) (= (Mul (Transpose x q) b) (Transpose (Mul x b) q))) :qid transpose_hw_bcast_Mul :pattern ((Mul (Transpose x q) b)) :pattern ((Transpose (Mul x b) q)))))

;; axiom: transpose_hw_bcast_Mul_r
;; group: element-wise
;; why: transpose_hw_bcast_Mul with the transposed tensor as the second operand.
(assert (forall ((x T) (b T) (q L)) (! (=> (and (hwperm q) (= (rank x) 4) (hwflat b)) (= (Mul b (Transpose x q)) (Transpose (Mul b x) q))) :qid transpose_hw_bcast_Mul_r :pattern ((Mul b (Transpose x q))) :pattern ((Transpose (Mul b x) q)))))

;; axiom: concat_Div
;; group: element-wise
;; why: Div of two Concats whose axes line up (counted from the right, as broadcasting aligns dims) and
;;   whose pieces have equal extents on that axis is the Concat of the pieces' Divs; off-axis dims
;;   may still broadcast.
(assert (forall ((a T) (b T) (c T) (d T) (ax Int) (axc Int)) (! (=> (and (<= 0 axc) (<= 0 ax) (= (- (rank a) ax) (- (rank c) axc)) (= (dim a ax) (dim c axc)) (= (dim b ax) (dim d axc))) (= (Div (Concat a b ax) (Concat c d axc)) (Concat (Div a c) (Div b d) (ite (>= (rank a) (rank c)) ax axc)))) :qid concat_Div :pattern ((Div (Concat a b ax) (Concat c d axc))))))

;; axiom: concat_Div_rev
;; group: element-wise
;; why: The reverse of concat_Div for operands of equal shapes (so the Concats it creates are well-
;;   formed).
(assert (forall ((a T) (b T) (c T) (d T) (ax Int)) (! (=> (and (= (shape a) (shape c)) (= (shape b) (shape d))) (= (Concat (Div a c) (Div b d) ax) (Div (Concat a b ax) (Concat c d ax)))) :qid concat_Div_rev :pattern ((Concat (Div a c) (Div b d) ax)))))

;; axiom: transpose_Div
;; group: element-wise
;; why: Div of equally transposed operands of equal rank is the transposed Div.
(assert (forall ((a T) (b T) (p L) (q L)) (! (=> (and (= p q) (= (rank a) (rank b)) (= (len p) (rank a))) (= (Div (Transpose a p) (Transpose b q)) (Transpose (Div a b) p))) :qid transpose_Div :pattern ((Div (Transpose a p) (Transpose b q))))))

;; axiom: transpose_Div_rev
;; group: element-wise
;; why: The reverse of transpose_Div.
(assert (forall ((a T) (b T) (p L)) (! (=> (and (= (rank a) (rank b)) (= (len p) (rank a))) (= (Transpose (Div a b) p) (Div (Transpose a p) (Transpose b p)))) :qid transpose_Div_rev :pattern ((Transpose (Div a b) p)))))

;; axiom: split_Div
;; group: element-wise
;; why: Div of the same piece of two equally shaped tensors is that piece of their Div.
(assert (forall ((x T) (y T) (ax Int) (sz L) (k Int) (ay Int) (sy L) (ky Int)) (! (=> (and (= ax ay) (= sz sy) (= k ky) (= (shape x) (shape y))) (= (Div (Split x ax sz k) (Split y ay sy ky)) (Split (Div x y) ax sz k))) :qid split_Div :pattern ((Div (Split x ax sz k) (Split y ay sy ky))))))

;; axiom: split_Div_rev
;; group: element-wise
;; why: The reverse of split_Div.
(assert (forall ((x T) (y T) (ax Int) (sz L) (k Int)) (! (=> (= (shape x) (shape y)) (= (Split (Div x y) ax sz k) (Div (Split x ax sz k) (Split y ax sz k)))) :qid split_Div_rev :pattern ((Split (Div x y) ax sz k)))))

;; axiom: concat_bcast_Div
;; group: element-wise
;; why: Div of a Concat and an operand that is constant along the Concat's axis (extent 1 there, or no
;;   such axis): apply it to each piece.
(assert (forall ((a T) (c T) (b T) (ax Int)) (! (=> (flat_on b a ax) (= (Div (Concat a c ax) b) (Concat (Div a b) (Div c b) ax))) :qid concat_bcast_Div :pattern ((Div (Concat a c ax) b)))))

;; axiom: concat_bcast_Div_r
;; group: element-wise
;; why: concat_bcast_Div with the Concat as the second operand.
(assert (forall ((a T) (c T) (b T) (ax Int)) (! (=> (flat_on b a ax) (= (Div b (Concat a c ax)) (Concat (Div b a) (Div b c) ax))) :qid concat_bcast_Div_r :pattern ((Div b (Concat a c ax))))))

;; axiom: concat_bcast_Div_rev
;; group: element-wise
;; why: The reverse of concat_bcast_Div for pieces of equal shape.
(assert (forall ((a T) (c T) (b T) (ax Int)) (! (=> (and (flat_on b a ax) (= (shape a) (shape c))) (= (Concat (Div a b) (Div c b) ax) (Div (Concat a c ax) b))) :qid concat_bcast_Div_rev :pattern ((Concat (Div a b) (Div c b) ax)))))

;; axiom: concat_bcast_Div_r_rev
;; group: element-wise
;; why: The reverse of concat_bcast_Div_r.
(assert (forall ((a T) (c T) (b T) (ax Int)) (! (=> (and (flat_on b a ax) (= (shape a) (shape c))) (= (Concat (Div b a) (Div b c) ax) (Div b (Concat a c ax)))) :qid concat_bcast_Div_r_rev :pattern ((Concat (Div b a) (Div b c) ax)))))

;; axiom: transpose_hw_bcast_Div
;; group: element-wise
;; why: Swapping the last two axes commutes with Div by an operand whose last two dims are 1 (or
;;   missing): it is the same along both.
(assert (forall ((x T) (b T) (q L)) (! (=> (and (hwperm q) (= (rank x) 4) (hwflat b)) (= (Div (Transpose x q) b) (Transpose (Div x b) q))) :qid transpose_hw_bcast_Div :pattern ((Div (Transpose x q) b)) :pattern ((Transpose (Div x b) q)))))

;; axiom: transpose_hw_bcast_Div_r
;; group: element-wise
;; why: transpose_hw_bcast_Div with the transposed tensor as the second operand.
(assert (forall ((x T) (b T) (q L)) (! (=> (and (hwperm q) (= (rank x) 4) (hwflat b)) (= (Div b (Transpose x q)) (Transpose (Div b x) q))) :qid transpose_hw_bcast_Div_r :pattern ((Div b (Transpose x q))) :pattern ((Transpose (Div b x) q)))))

;; axiom: concat_Pow
;; group: element-wise
;; why: Pow of two Concats whose axes line up (counted from the right, as broadcasting aligns dims) and
;;   whose pieces have equal extents on that axis is the Concat of the pieces' Pows; off-axis dims
;;   may still broadcast.
(assert (forall ((a T) (b T) (c T) (d T) (ax Int) (axc Int)) (! (=> (and (<= 0 axc) (<= 0 ax) (= (- (rank a) ax) (- (rank c) axc)) (= (dim a ax) (dim c axc)) (= (dim b ax) (dim d axc))) (= (Pow (Concat a b ax) (Concat c d axc)) (Concat (Pow a c) (Pow b d) (ite (>= (rank a) (rank c)) ax axc)))) :qid concat_Pow :pattern ((Pow (Concat a b ax) (Concat c d axc))))))

;; axiom: concat_Pow_rev
;; group: element-wise
;; why: The reverse of concat_Pow for operands of equal shapes (so the Concats it creates are well-
;;   formed).
(assert (forall ((a T) (b T) (c T) (d T) (ax Int)) (! (=> (and (= (shape a) (shape c)) (= (shape b) (shape d))) (= (Concat (Pow a c) (Pow b d) ax) (Pow (Concat a b ax) (Concat c d ax)))) :qid concat_Pow_rev :pattern ((Concat (Pow a c) (Pow b d) ax)))))

;; axiom: transpose_Pow
;; group: element-wise
;; why: Pow of equally transposed operands of equal rank is the transposed Pow.
(assert (forall ((a T) (b T) (p L) (q L)) (! (=> (and (= p q) (= (rank a) (rank b)) (= (len p) (rank a))) (= (Pow (Transpose a p) (Transpose b q)) (Transpose (Pow a b) p))) :qid transpose_Pow :pattern ((Pow (Transpose a p) (Transpose b q))))))

;; axiom: transpose_Pow_rev
;; group: element-wise
;; why: The reverse of transpose_Pow.
(assert (forall ((a T) (b T) (p L)) (! (=> (and (= (rank a) (rank b)) (= (len p) (rank a))) (= (Transpose (Pow a b) p) (Pow (Transpose a p) (Transpose b p)))) :qid transpose_Pow_rev :pattern ((Transpose (Pow a b) p)))))

;; axiom: split_Pow
;; group: element-wise
;; why: Pow of the same piece of two equally shaped tensors is that piece of their Pow.
(assert (forall ((x T) (y T) (ax Int) (sz L) (k Int) (ay Int) (sy L) (ky Int)) (! (=> (and (= ax ay) (= sz sy) (= k ky) (= (shape x) (shape y))) (= (Pow (Split x ax sz k) (Split y ay sy ky)) (Split (Pow x y) ax sz k))) :qid split_Pow :pattern ((Pow (Split x ax sz k) (Split y ay sy ky))))))

;; axiom: split_Pow_rev
;; group: element-wise
;; why: The reverse of split_Pow.
(assert (forall ((x T) (y T) (ax Int) (sz L) (k Int)) (! (=> (= (shape x) (shape y)) (= (Split (Pow x y) ax sz k) (Pow (Split x ax sz k) (Split y ax sz k)))) :qid split_Pow_rev :pattern ((Split (Pow x y) ax sz k)))))

;; axiom: concat_bcast_Pow
;; group: element-wise
;; why: Pow of a Concat and an operand that is constant along the Concat's axis (extent 1 there, or no
;;   such axis): apply it to each piece.
(assert (forall ((a T) (c T) (b T) (ax Int)) (! (=> (flat_on b a ax) (= (Pow (Concat a c ax) b) (Concat (Pow a b) (Pow c b) ax))) :qid concat_bcast_Pow :pattern ((Pow (Concat a c ax) b)))))

;; axiom: concat_bcast_Pow_r
;; group: element-wise
;; why: concat_bcast_Pow with the Concat as the second operand.
(assert (forall ((a T) (c T) (b T) (ax Int)) (! (=> (flat_on b a ax) (= (Pow b (Concat a c ax)) (Concat (Pow b a) (Pow b c) ax))) :qid concat_bcast_Pow_r :pattern ((Pow b (Concat a c ax))))))

;; axiom: concat_bcast_Pow_rev
;; group: element-wise
;; why: The reverse of concat_bcast_Pow for pieces of equal shape.
(assert (forall ((a T) (c T) (b T) (ax Int)) (! (=> (and (flat_on b a ax) (= (shape a) (shape c))) (= (Concat (Pow a b) (Pow c b) ax) (Pow (Concat a c ax) b))) :qid concat_bcast_Pow_rev :pattern ((Concat (Pow a b) (Pow c b) ax)))))

;; axiom: concat_bcast_Pow_r_rev
;; group: element-wise
;; why: The reverse of concat_bcast_Pow_r.
(assert (forall ((a T) (c T) (b T) (ax Int)) (! (=> (and (flat_on b a ax) (= (shape a) (shape c))) (= (Concat (Pow b a) (Pow b c) ax) (Pow b (Concat a c ax)))) :qid concat_bcast_Pow_r_rev :pattern ((Concat (Pow b a) (Pow b c) ax)))))

;; axiom: transpose_hw_bcast_Pow
;; group: element-wise
;; why: Swapping the last two axes commutes with Pow by an operand whose last two dims are 1 (or
;;   missing): it is the same along both.
(assert (forall ((x T) (b T) (q L)) (! (=> (and (hwperm q) (= (rank x) 4) (hwflat b)) (= (Pow (Transpose x q) b) (Transpose (Pow x b) q))) :qid transpose_hw_bcast_Pow :pattern ((Pow (Transpose x q) b)) :pattern ((Transpose (Pow x b) q)))))

;; axiom: transpose_hw_bcast_Pow_r
;; group: element-wise
;; why: transpose_hw_bcast_Pow with the transposed tensor as the second operand.
(assert (forall ((x T) (b T) (q L)) (! (=> (and (hwperm q) (= (rank x) 4) (hwflat b)) (= (Pow b (Transpose x q)) (Transpose (Pow b x) q))) :qid transpose_hw_bcast_Pow_r :pattern ((Pow b (Transpose x q))) :pattern ((Transpose (Pow b x) q)))))

;; ---------------- concat/split ----------------

;; axiom: split_concat_0
;; group: concat/split
;; why: Splitting a Concat at the boundary between its inputs (on its axis) gives back the first input.
(assert (forall ((a T) (b T) (ax Int) (ay Int) (s0 Int) (s1 Int) (k Int)) (! (=> (and (= ax ay) (= k 0) (= s0 (dim a ax)) (= s1 (dim b ax))) (= (Split (Concat a b ax) ay (l2 s0 s1) k) a)) :qid split_concat_0 :pattern ((Split (Concat a b ax) ay (l2 s0 s1) k)))))

;; axiom: split_concat_1
;; group: concat/split
;; why: ... and the second input.
(assert (forall ((a T) (b T) (ax Int) (ay Int) (s0 Int) (s1 Int) (k Int)) (! (=> (and (= ax ay) (= k 1) (= s0 (dim a ax)) (= s1 (dim b ax))) (= (Split (Concat a b ax) ay (l2 s0 s1) k) b)) :qid split_concat_1 :pattern ((Split (Concat a b ax) ay (l2 s0 s1) k)))))

;; axiom: concat_split
;; group: concat/split
;; why: A two-way Split's pieces concatenated on its axis give back its input.
(assert (forall ((x T) (ax Int) (sz L) (k Int)) (! (=> (and (= (len sz) 2) (<= 0 ax) (< ax (rank x)) (>= (nth sz 0) 0) (>= (nth sz 1) 0) (= (+ (nth sz 0) (nth sz 1)) (dim x ax))) (= (Concat (Split x ax sz 0) (Split x ax sz 1) ax) x)) :qid concat_split :pattern ((Split x ax sz k)))))

;; axiom: split3_nested
;; group: concat/split
;; why: A three-way Split is a two-way Split whose second piece is split again.
(assert (forall ((x T) (ax Int) (s0 Int) (s1 Int) (s2 Int) (k Int)) (! (=> (and (<= 0 k) (<= k 2)) (= (Split x ax (cons s0 (cons s1 (cons s2 nil))) k) (ite (= k 0) (Split x ax (l2 s0 (+ s1 s2)) 0) (Split (Split x ax (l2 s0 (+ s1 s2)) 1) ax (l2 s1 s2) (- k 1))))) :qid split3_nested :pattern ((Split x ax (cons s0 (cons s1 (cons s2 nil))) k)))))

;; axiom: concat_interchange
;; group: concat/split
;; why: A 2x2 block tensor can be assembled row-first or column-first when the blocks line up (a and c
;;   equally long on the inner axis).
(assert (forall ((a T) (b T) (c T) (d T) (ax Int) (ay Int) (az Int)) (! (=> (and (= ax ay) (not (= ax az)) (= (dim a ax) (dim c ax))) (= (Concat (Concat a b ax) (Concat c d ay) az) (Concat (Concat a c az) (Concat b d az) ax))) :qid concat_interchange :pattern ((Concat (Concat a b ax) (Concat c d ay) az)))))

;; axiom: concat_assoc
;; group: concat/split
;; why: Concat on one axis is associative.
(assert (forall ((a T) (b T) (c T) (ax Int) (ay Int)) (! (=> (= ax ay) (= (Concat (Concat a b ax) c ay) (Concat a (Concat b c ax) ay))) :qid concat_assoc :pattern ((Concat (Concat a b ax) c ay)) :pattern ((Concat a (Concat b c ax) ay)))))

;; ---------------- transpose/reshape ----------------

;; axiom: transpose_compose
;; group: transpose/reshape
;; why: Transposing by p then q moves input dim p[q[i]] to position i: one Transpose by permute(p, q).
;;   (:weight 3 delays its instances: with x = Transpose(x, identity) its pattern matches its own output.)
(assert (forall ((x T) (p L) (q L)) (! (= (Transpose (Transpose x p) q) (Transpose x (permute p q))) :qid transpose_compose :weight 3 :pattern ((Transpose (Transpose x p) q)))))

;; axiom: transpose_identity
;; group: transpose/reshape
;; why: The identity permutation changes nothing.
(assert (forall ((x T) (p L)) (! (=> (= p (iota (rank x))) (= (Transpose x p) x)) :qid transpose_identity :pattern ((Transpose x p)))))

;; axiom: transpose_concat
;; group: transpose/reshape
;; why: Transposing a Concat concatenates the transposed inputs on the axis's new position.
(assert (forall ((a T) (b T) (ax Int) (p L)) (! (=> (= (len p) (rank a)) (= (Transpose (Concat a b ax) p) (Concat (Transpose a p) (Transpose b p) (lindex p ax)))) :qid transpose_concat :pattern ((Transpose (Concat a b ax) p)))))

;; axiom: reshape_compose
;; group: transpose/reshape
;; why: Reshapes keep the row-major element order, so only the last one matters.
(assert (forall ((x T) (s L) (t L)) (! (= (Reshape (Reshape x s) t) (Reshape x t)) :qid reshape_compose :pattern ((Reshape (Reshape x s) t)))))

;; axiom: reshape_identity
;; group: transpose/reshape
;; why: Reshaping to the shape a tensor already has changes nothing.
(assert (forall ((x T) (s L)) (! (=> (= s (shape x)) (= (Reshape x s) x)) :qid reshape_identity :pattern ((Reshape x s)))))

;; axiom: reshape_identity_rank1
;; group: transpose/reshape
;; why: reshape_identity with the shape compared extent by extent, for a tensor of rank 1 whose shape is
;;   only known through its extents (lists are compared element-wise).
(assert (forall ((x T) (s L)) (! (=> (and (= (len s) 1) (= (rank x) 1) (= (nth s 0) (dim x 0))) (= (Reshape x s) x)) :qid reshape_identity_rank1 :pattern ((Reshape x s)))))

;; axiom: reshape_identity_rank2
;; group: transpose/reshape
;; why: reshape_identity with the shape compared extent by extent, for a tensor of rank 2 whose shape is
;;   only known through its extents (lists are compared element-wise).
(assert (forall ((x T) (s L)) (! (=> (and (= (len s) 2) (= (rank x) 2) (= (nth s 0) (dim x 0)) (= (nth s 1) (dim x 1))) (= (Reshape x s) x)) :qid reshape_identity_rank2 :pattern ((Reshape x s)))))

;; axiom: reshape_identity_rank3
;; group: transpose/reshape
;; why: reshape_identity with the shape compared extent by extent, for a tensor of rank 3 whose shape is
;;   only known through its extents (lists are compared element-wise).
(assert (forall ((x T) (s L)) (! (=> (and (= (len s) 3) (= (rank x) 3) (= (nth s 0) (dim x 0)) (= (nth s 1) (dim x 1)) (= (nth s 2) (dim x 2))) (= (Reshape x s) x)) :qid reshape_identity_rank3 :pattern ((Reshape x s)))))

;; axiom: reshape_identity_rank4
;; group: transpose/reshape
;; why: reshape_identity with the shape compared extent by extent, for a tensor of rank 4 whose shape is
;;   only known through its extents (lists are compared element-wise).
(assert (forall ((x T) (s L)) (! (=> (and (= (len s) 4) (= (rank x) 4) (= (nth s 0) (dim x 0)) (= (nth s 1) (dim x 1)) (= (nth s 2) (dim x 2)) (= (nth s 3) (dim x 3))) (= (Reshape x s) x)) :qid reshape_identity_rank4 :pattern ((Reshape x s)))))

;; axiom: reshape_identity_rank5
;; group: transpose/reshape
;; why: reshape_identity with the shape compared extent by extent, for a tensor of rank 5 whose shape is
;;   only known through its extents (lists are compared element-wise).
(assert (forall ((x T) (s L)) (! (=> (and (= (len s) 5) (= (rank x) 5) (= (nth s 0) (dim x 0)) (= (nth s 1) (dim x 1)) (= (nth s 2) (dim x 2)) (= (nth s 3) (dim x 3)) (= (nth s 4) (dim x 4))) (= (Reshape x s) x)) :qid reshape_identity_rank5 :pattern ((Reshape x s)))))

;; axiom: reshape_identity_rank6
;; group: transpose/reshape
;; why: reshape_identity with the shape compared extent by extent, for a tensor of rank 6 whose shape is
;;   only known through its extents (lists are compared element-wise).
(assert (forall ((x T) (s L)) (! (=> (and (= (len s) 6) (= (rank x) 6) (= (nth s 0) (dim x 0)) (= (nth s 1) (dim x 1)) (= (nth s 2) (dim x 2)) (= (nth s 3) (dim x 3)) (= (nth s 4) (dim x 4)) (= (nth s 5) (dim x 5))) (= (Reshape x s) x)) :qid reshape_identity_rank6 :pattern ((Reshape x s)))))

;; axiom: matmul_reshape_rows
;; group: transpose/reshape
;; why: A product by a matrix acts on each row (the last axis) alone, so regrouping the rows by a
;;   Reshape that keeps the last axis commutes with it; the result's last extent becomes the matrix's
;;   column count.
(assert (forall ((x T) (w T) (s L)) (! (=> (and (= (rank w) 2) (>= (rank x) 2) (>= (len s) 2) (= (nth s (- (len s) 1)) (dim x (- (rank x) 1)))) (= (MatMul (Reshape x s) w) (Reshape (MatMul x w) (lset s (- (len s) 1) (dim w 1))))) :qid matmul_reshape_rows :pattern ((MatMul (Reshape x s) w)))))

;; axiom: add_bias_reshape
;; group: transpose/reshape
;; why: A bias over the last axis (or a single value) is added to every row alike, so it commutes with a
;;   Reshape that keeps the last axis.
(assert (forall ((a T) (b T) (s L)) (! (=> (and (= (rank b) 1) (>= (rank a) 1) (>= (len s) 1) (= (nth s (- (len s) 1)) (dim a (- (rank a) 1))) (or (= (dim b 0) 1) (= (dim b 0) (dim a (- (rank a) 1))))) (= (Add (Reshape a s) b) (Reshape (Add a b) s))) :qid add_bias_reshape :pattern ((Add (Reshape a s) b)))))

;; ---------------- matmul ----------------

;; axiom: matmul_assoc
;; group: matmul
;; why: Matrix products are associative (batch dims broadcast alike on both sides).
(assert (forall ((a T) (b T) (c T)) (! (= (MatMul (MatMul a b) c) (MatMul a (MatMul b c))) :qid matmul_assoc :pattern ((MatMul (MatMul a b) c)) :pattern ((MatMul a (MatMul b c))))))

;; axiom: matmul_add_left
;; group: matmul
;; why: MatMul is linear in its first operand (equal shapes, so no broadcasting changes the sum).
(assert (forall ((a T) (b T) (c T)) (! (=> (= (shape a) (shape b)) (= (MatMul (Add a b) c) (Add (MatMul a c) (MatMul b c)))) :qid matmul_add_left :pattern ((MatMul (Add a b) c)) :pattern ((Add (MatMul a c) (MatMul b c))))))

;; axiom: matmul_add_right
;; group: matmul
;; why: MatMul is linear in its second operand.
(assert (forall ((a T) (b T) (c T)) (! (=> (= (shape b) (shape c)) (= (MatMul a (Add b c)) (Add (MatMul a b) (MatMul a c)))) :qid matmul_add_right :pattern ((MatMul a (Add b c))) :pattern ((Add (MatMul a b) (MatMul a c))))))

;; axiom: matmul_smul_left
;; group: matmul
;; why: (ua)b = u(ab).
(assert (forall ((a T) (b T) (u Real)) (! (= (MatMul (SMul a u) b) (SMul (MatMul a b) u)) :qid matmul_smul_left :pattern ((MatMul (SMul a u) b)) :pattern ((SMul (MatMul a b) u)))))

;; axiom: matmul_smul_right
;; group: matmul
;; why: a(ub) = u(ab).
(assert (forall ((a T) (b T) (u Real)) (! (= (MatMul a (SMul b u)) (SMul (MatMul a b) u)) :qid matmul_smul_right :pattern ((MatMul a (SMul b u))))))

;; axiom: matmul_concat_cols
;; group: matmul
;; why: x [w | v] = [xw | xv]: output columns come from weight columns.
(assert (forall ((x T) (w T) (v T) (ax Int)) (! (=> (and (>= (rank x) 2) (>= (rank w) 2) (= (rank v) (rank w)) (= ax (- (rank w) 1))) (= (MatMul x (Concat w v ax)) (Concat (MatMul x w) (MatMul x v) (- (imax (rank x) (rank w)) 1)))) :qid matmul_concat_cols :pattern ((MatMul x (Concat w v ax))))))

;; axiom: matmul_concat_cols_rev
;; group: matmul
;; why: The reverse of matmul_concat_cols for matrices (whose row counts agree since both products are
;;   well-formed).
(assert (forall ((x T) (w T) (v T) (ax Int)) (! (=> (and (>= (rank x) 2) (= (rank w) 2) (= (rank v) 2) (= ax (- (rank x) 1))) (= (Concat (MatMul x w) (MatMul x v) ax) (MatMul x (Concat w v 1)))) :qid matmul_concat_cols_rev :pattern ((Concat (MatMul x w) (MatMul x v) ax)))))

;; axiom: matmul_concat_rows
;; group: matmul
;; why: [a; b] w = [aw; bw] for a row axis, or for a batch axis that w does not have.
(assert (forall ((a T) (b T) (w T) (ax Int)) (! (=> (and (>= (rank w) 2) (>= (rank a) (rank w)) (or (= ax (- (rank a) 2)) (and (<= 0 ax) (< ax (- (rank a) (rank w)))))) (= (MatMul (Concat a b ax) w) (Concat (MatMul a w) (MatMul b w) ax))) :qid matmul_concat_rows :pattern ((MatMul (Concat a b ax) w)))))

;; axiom: matmul_concat_inner
;; group: matmul
;; why: [a1 | a2][b1; b2] = a1 b1 + a2 b2 when the inner extents line up.
(assert (forall ((a1 T) (a2 T) (b1 T) (b2 T) (ax Int) (bx Int)) (! (=> (and (>= (rank a1) 2) (>= (rank b1) 2) (= ax (- (rank a1) 1)) (= bx (- (rank b1) 2)) (= (dim a1 ax) (dim b1 bx))) (= (MatMul (Concat a1 a2 ax) (Concat b1 b2 bx)) (Add (MatMul a1 b1) (MatMul a2 b2)))) :qid matmul_concat_inner :pattern ((MatMul (Concat a1 a2 ax) (Concat b1 b2 bx))))))

;; axiom: matmul_scale_cols
;; group: matmul
;; why: Scaling output column j (a vector broadcast on the last axis) is scaling weight column j.
(assert (forall ((x T) (w T) (b T)) (! (=> (and (>= (rank x) 2) (>= (rank w) 2) (= (rank b) 1) (= (dim b 0) (dim w (- (rank w) 1)))) (= (Mul (MatMul x w) b) (MatMul x (Mul w b)))) :qid matmul_scale_cols :pattern ((Mul (MatMul x w) b)) :pattern ((MatMul x (Mul w b))))))

;; axiom: matmul_transpose
;; group: matmul
;; why: (ab)^T = b^T a^T for matrices.
(assert (forall ((a T) (b T) (p L)) (! (=> (and (= (rank a) 2) (= (rank b) 2) (= p (l2 1 0))) (= (Transpose (MatMul a b) p) (MatMul (Transpose b p) (Transpose a p)))) :qid matmul_transpose :pattern ((Transpose (MatMul a b) p)) :pattern ((MatMul (Transpose b p) (Transpose a p))))))

;; ---------------- conv ----------------

;; axiom: matmul_transpose_batched
;; group: matmul
;; why: (AB)^T = B^T A^T for every matrix of a batch: a rank-3 product (one operand of rank 3, the
;;   other of rank 2 or 3, batch dims broadcast) transposed on its last two axes is the product of the
;;   operands each transposed on its last two axes, in the other order.
(assert (forall ((a T) (b T) (p L)) (! (=> (and (= p (l3 0 2 1)) (or (= (rank a) 2) (= (rank a) 3)) (or (= (rank b) 2) (= (rank b) 3)) (or (= (rank a) 3) (= (rank b) 3))) (= (Transpose (MatMul a b) p) (MatMul (Transpose b (tperm (rank b))) (Transpose a (tperm (rank a)))))) :qid matmul_transpose_batched :pattern ((Transpose (MatMul a b) p)))))

;; axiom: matmul_transpose_batched_rev
;; group: matmul
;; why: The reverse of matmul_transpose_batched.
(assert (forall ((a T) (b T) (q L) (r L)) (! (=> (and (or (= (rank a) 2) (= (rank a) 3)) (or (= (rank b) 2) (= (rank b) 3)) (or (= (rank a) 3) (= (rank b) 3)) (= q (tperm (rank b))) (= r (tperm (rank a)))) (= (MatMul (Transpose b q) (Transpose a r)) (Transpose (MatMul a b) (l3 0 2 1)))) :qid matmul_transpose_batched_rev :pattern ((MatMul (Transpose b q) (Transpose a r))))))

;; axiom: conv_add_weight
;; group: conv
;; why: Convolution is linear in the kernel.
(assert (forall ((x T) (w T) (v T) (s L) (p L) (d L) (g Int)) (! (=> (or (= (shape w) (shape v)) (same4 w v)) (= (Conv x (Add w v) s p d g) (Add (Conv x w s p d g) (Conv x v s p d g)))) :qid conv_add_weight :pattern ((Conv x (Add w v) s p d g)) :pattern ((Add (Conv x w s p d g) (Conv x v s p d g))))))

;; axiom: conv_add_input
;; group: conv
;; why: Convolution is linear in the input (zero padding is linear too).
(assert (forall ((x T) (y T) (w T) (s L) (p L) (d L) (g Int)) (! (=> (or (= (shape x) (shape y)) (same4 x y)) (= (Conv (Add x y) w s p d g) (Add (Conv x w s p d g) (Conv y w s p d g)))) :qid conv_add_input :pattern ((Conv (Add x y) w s p d g)) :pattern ((Add (Conv x w s p d g) (Conv y w s p d g))))))

;; axiom: conv_smul_weight
;; group: conv
;; why: Scaling the kernel scales the output.
(assert (forall ((x T) (w T) (u Real) (s L) (p L) (d L) (g Int)) (! (= (Conv x (SMul w u) s p d g) (SMul (Conv x w s p d g) u)) :qid conv_smul_weight :pattern ((Conv x (SMul w u) s p d g)) :pattern ((SMul (Conv x w s p d g) u)))))

;; axiom: conv_smul_input
;; group: conv
;; why: Scaling the input scales the output.
(assert (forall ((x T) (w T) (u Real) (s L) (p L) (d L) (g Int)) (! (= (Conv (SMul x u) w s p d g) (SMul (Conv x w s p d g) u)) :qid conv_smul_input :pattern ((Conv (SMul x u) w s p d g)))))

;; axiom: conv_concat_weight
;; group: conv
;; why: Without groups, output channels come from kernels independently: stacking kernels stacks output
;;   channels. (False for grouped convolutions: stacking moves kernels into other groups.)
(assert (forall ((x T) (w T) (v T) (s L) (p L) (d L) (g Int) (ax Int)) (! (=> (and (= ax 0) (= g 1)) (= (Conv x (Concat w v ax) s p d g) (Concat (Conv x w s p d g) (Conv x v s p d g) 1))) :qid conv_concat_weight :pattern ((Conv x (Concat w v ax) s p d g)))))

;; axiom: conv_concat_weight_rev
;; group: conv
;; why: The reverse of conv_concat_weight for 2-D kernels of equal size.
(assert (forall ((x T) (w T) (v T) (s L) (p L) (d L) (g Int) (ax Int)) (! (=> (and (= ax 1) (= g 1) (= (rank w) 4) (= (rank v) 4) (= (dim w 1) (dim v 1)) (= (dim w 2) (dim v 2)) (= (dim w 3) (dim v 3))) (= (Concat (Conv x w s p d g) (Conv x v s p d g) ax) (Conv x (Concat w v 0) s p d g))) :qid conv_concat_weight_rev :pattern ((Concat (Conv x w s p d g) (Conv x v s p d g) ax)))))

;; axiom: conv_concat_input
;; group: conv
;; why: Without groups, a convolution sums over input channels: split the channels of input and kernel
;;   alike.
(assert (forall ((x T) (y T) (w T) (v T) (s L) (p L) (d L) (g Int) (ax Int) (bx Int)) (! (=> (and (= g 1) (= ax 1) (= bx 1) (= (dim x 1) (dim w 1))) (= (Conv (Concat x y ax) (Concat w v bx) s p d g) (Add (Conv x w s p d g) (Conv y v s p d g)))) :qid conv_concat_input :pattern ((Conv (Concat x y ax) (Concat w v bx) s p d g)))))

;; axiom: conv_concat_batch
;; group: conv
;; why: Batch items are convolved independently.
(assert (forall ((x T) (y T) (w T) (s L) (p L) (d L) (g Int) (ax Int)) (! (=> (= ax 0) (= (Conv (Concat x y ax) w s p d g) (Concat (Conv x w s p d g) (Conv y w s p d g) 0))) :qid conv_concat_batch :pattern ((Conv (Concat x y ax) w s p d g)))))

;; axiom: conv_enlarge
;; group: conv
;; why: Zero-padding a kernel by e on each side, with e more padding of the input on each side, computes
;;   the same windows (dilation 1): the extra taps multiply zeros.
(assert (forall ((x T) (w T) (k1 Int) (k2 Int) (s L) (q1 Int) (q2 Int) (q3 Int) (q4 Int) (d L) (g Int)) (! (let ((e1 (- k1 (dim w 2))) (e2 (- k2 (dim w 3)))) (=> (and (= (rank w) 4) (= d (l2 1 1)) (>= e1 0) (>= e2 0) (= (mod e1 2) 0) (= (mod e2 2) 0) (>= q1 (div e1 2)) (>= q3 (div e1 2)) (>= q2 (div e2 2)) (>= q4 (div e2 2))) (= (Conv x (Enlarge w (l2 k1 k2)) s (l4 q1 q2 q3 q4) d g) (Conv x w s (l4 (- q1 (div e1 2)) (- q2 (div e2 2)) (- q3 (div e1 2)) (- q4 (div e2 2))) d g)))) :qid conv_enlarge :pattern ((Conv x (Enlarge w (l2 k1 k2)) s (l4 q1 q2 q3 q4) d g)))))

;; axiom: conv_identity_kernel
;; group: conv
;; why: The identity kernel (Constant fill 1: a 1 at the centre of channel c's own input channel) with
;;   'same' padding, unit strides and dilations reproduces the input.
(assert (forall ((x T) (f Int) (sh L) (dt Int) (v Real) (s L) (p L) (d L) (g Int)) (! (=> (and (= f 1) (= (rank x) 4) (= (len sh) 4) (= (nth sh 0) (dim x 1)) (= (* (nth sh 1) g) (dim x 1)) (>= g 1) (= (mod (nth sh 2) 2) 1) (= (mod (nth sh 3) 2) 1) (= s (l2 1 1)) (= d (l2 1 1)) (= p (l4 (div (nth sh 2) 2) (div (nth sh 3) 2) (div (nth sh 2) 2) (div (nth sh 3) 2)))) (= (Conv x (Const f sh dt v) s p d g) x)) :qid conv_identity_kernel :pattern ((Conv x (Const f sh dt v) s p d g)))))

;; axiom: conv_identity_kernel_size
;; group: conv
;; why: An identity kernel (Constant fill 1) has its only non-zeros at the spatial centre, so with
;;   'same' padding, unit strides and dilations it computes what the 1x1 identity kernel with the
;;   same channels computes without padding, whatever the channel counts and groups.
(assert (forall ((x T) (f Int) (sh L) (dt Int) (v Real) (s L) (p L) (d L) (g Int)) (! (=> (and (= f 1) (= (rank x) 4) (= (len sh) 4) (= (mod (nth sh 2) 2) 1) (= (mod (nth sh 3) 2) 1) (= s (l2 1 1)) (= d (l2 1 1)) (= p (l4 (div (nth sh 2) 2) (div (nth sh 3) 2) (div (nth sh 2) 2) (div (nth sh 3) 2)))) (= (Conv x (Const f sh dt v) s p d g) (Conv x (Const f (l4 (nth sh 0) (nth sh 1) 1 1) dt v) s (l4 0 0 0 0) d g))) :qid conv_identity_kernel_size :pattern ((Conv x (Const f sh dt v) s p d g)))))

;; axiom: conv_scale_out_channels
;; group: conv
;; why: Scaling kernel c (a [C, 1, ..., 1] factor broadcast over the kernel) scales output channel c.
(assert (forall ((x T) (w T) (k T) (r L) (s L) (p L) (d L) (g Int)) (! (=> (and (>= (rank w) 3) (= r (cons (dim w 0) (ones (- (rank w) 1)))) (= (rank k) 1) (= (dim k 0) (dim w 0))) (= (Conv x (Mul w (Reshape k r)) s p d g) (ChMul (Conv x w s p d g) k))) :qid conv_scale_out_channels :pattern ((Conv x (Mul w (Reshape k r)) s p d g)))))

;; axiom: avgpool_as_conv
;; group: conv
;; why: A depthwise convolution with the average-pooling kernel (Constant fill 2: 1/(kh kw) everywhere)
;;   and no padding is AveragePool.
(assert (forall ((x T) (f Int) (sh L) (dt Int) (v Real) (s L) (p L) (d L) (g Int)) (! (=> (and (= f 2) (= (rank x) 4) (= g (dim x 1)) (= (len sh) 4) (= (nth sh 0) (dim x 1)) (= (nth sh 1) 1) (= d (l2 1 1)) (= p (zeros 4))) (= (Conv x (Const f sh dt v) s p d g) (AvgPool x (l2 (nth sh 2) (nth sh 3)) s p 0 1))) :qid avgpool_as_conv :pattern ((Conv x (Const f sh dt v) s p d g)))))

;; axiom: conv_concat_batch_rev
;; group: conv
;; why: The reverse of conv_concat_batch for inputs of equal channel and spatial extents.
(assert (forall ((x T) (y T) (w T) (s L) (p L) (d L) (g Int) (ax Int)) (! (=> (and (= ax 0) (= (rank x) 4) (= (rank y) 4) (= (dim x 1) (dim y 1)) (= (dim x 2) (dim y 2)) (= (dim x 3) (dim y 3))) (= (Concat (Conv x w s p d g) (Conv y w s p d g) ax) (Conv (Concat x y 0) w s p d g))) :qid conv_concat_batch_rev :pattern ((Concat (Conv x w s p d g) (Conv y w s p d g) ax)))))

;; axiom: conv_scale_in_channels
;; group: conv
;; why: Scaling input channel c (a [C, 1, ..., 1] factor, or a rank-3 [C or 1, 1, 1] one on a rank-4
;;   input, which broadcasts the same way) is scaling the kernels' input channel c; zero padding stays zero. (Without groups, so the factor lines up with the kernel's second axis.)
(assert (forall ((x T) (b T) (w T) (s L) (p L) (d L) (g Int)) (! (=> (and (= g 1) (>= (rank x) 3) (= (rank w) (rank x)) (or (perchannel b x) (chanflat4 b x))) (= (Conv (Mul x b) w s p d g) (Conv x (Mul w b) s p d g))) :qid conv_scale_in_channels :pattern ((Conv (Mul x b) w s p d g)))))

;; axiom: conv_scale_in_channels_rev
;; group: conv
;; why: The reverse of conv_scale_in_channels.
(assert (forall ((x T) (b T) (w T) (s L) (p L) (d L) (g Int)) (! (=> (and (= g 1) (>= (rank x) 3) (= (rank w) (rank x)) (or (perchannel b x) (chanflat4 b x))) (= (Conv x (Mul w b) s p d g) (Conv (Mul x b) w s p d g))) :qid conv_scale_in_channels_rev :pattern ((Conv x (Mul w b) s p d g)))))

;; axiom: identity_kernel_enlarge
;; group: conv
;; why: The identity kernel (Constant fill 1) of odd spatial size k1 x k2 has its ones at the centre
;;   (k1/2, k2/2), which is where zero-padding the 1x1 identity kernel of the same channels by
;;   (k - 1)/2 on each side puts them; all other taps are zero in both.
(assert (forall ((f Int) (sh L) (dt Int) (v Real)) (! (=> (and (= f 1) (= (len sh) 4) (= (mod (nth sh 2) 2) 1) (= (mod (nth sh 3) 2) 1) (or (> (nth sh 2) 1) (> (nth sh 3) 1))) (= (Const f sh dt v) (Enlarge (Const f (l4 (nth sh 0) (nth sh 1) 1 1) dt v) (l2 (nth sh 2) (nth sh 3))))) :qid identity_kernel_enlarge :pattern ((Const f sh dt v)))))

;; axiom: enlarge_mul_hwflat
;; group: conv
;; why: Multiplying a rank-4 kernel by a factor that is constant over the two spatial axes (hwflat)
;;   commutes with zero-padding those axes: the padded taps stay zero, the others are scaled alike.
(assert (forall ((w T) (b T) (k L)) (! (=> (and (= (rank w) 4) (<= (rank b) 4) (hwflat b)) (= (Enlarge (Mul b w) k) (Mul b (Enlarge w k)))) :qid enlarge_mul_hwflat :pattern ((Enlarge (Mul b w) k)) :pattern ((Mul b (Enlarge w k))))))

;; axiom: enlarge_mul_hwflat_r
;; group: conv
;; why: enlarge_mul_hwflat with the factor as the second operand.
(assert (forall ((w T) (b T) (k L)) (! (=> (and (= (rank w) 4) (<= (rank b) 4) (hwflat b)) (= (Enlarge (Mul w b) k) (Mul (Enlarge w k) b))) :qid enlarge_mul_hwflat_r :pattern ((Enlarge (Mul w b) k)) :pattern ((Mul (Enlarge w k) b)))))

;; axiom: conv1x1_transpose_hw
;; group: conv
;; why: Convolving an image with H and W swapped by a 1x1 kernel (its own transpose) is convolving the
;;   image with strides, pads and dilations swapped, then swapping H and W. (The general case swaps
;;   the kernel too; it is left out because it makes the solver's instantiation loop.)
(assert (forall ((x T) (q L) (w T) (s L) (p L) (d L) (g Int)) (! (=> (and (hwperm q) (= (rank x) 4) (= (rank w) 4) (= (dim w 2) 1) (= (dim w 3) 1) (= (len s) 2) (= (len p) 4) (= (len d) 2)) (= (Conv (Transpose x q) w s p d g) (Transpose (Conv x w (swap2 s) (swap4 p) (swap2 d) g) q))) :qid conv1x1_transpose_hw :pattern ((Conv (Transpose x q) w s p d g)) :pattern ((Transpose (Conv x w (swap2 s) (swap4 p) (swap2 d) g) q)))))

;; axiom: conv1x1_transpose_hw_rev
;; group: conv
;; why: The reverse of conv1x1_transpose_hw.
(assert (forall ((x T) (q L) (w T) (s L) (p L) (d L) (g Int)) (! (=> (and (hwperm q) (= (rank x) 4) (= (rank w) 4) (= (dim w 2) 1) (= (dim w 3) 1) (= (len s) 2) (= (len p) 4) (= (len d) 2)) (= (Transpose (Conv x w s p d g) q) (Conv (Transpose x q) w (swap2 s) (swap4 p) (swap2 d) g))) :qid conv1x1_transpose_hw_rev :pattern ((Transpose (Conv x w s p d g) q)))))

;; axiom: conv1x1_avgpool
;; group: conv
;; why: A 1x1 convolution (unit strides, no padding) mixes channels pixel by pixel, a linear map that
;;   commutes with averaging the same windows of every channel.
(assert (forall ((x T) (k L) (s L) (p L) (c Int) (i Int) (w T) (s1 L) (p1 L) (d1 L) (g Int)) (! (=> (and (= (rank w) 4) (= (dim w 2) 1) (= (dim w 3) 1) (= s1 (l2 1 1)) (= p1 (zeros 4))) (= (Conv (AvgPool x k s p c i) w s1 p1 d1 g) (AvgPool (Conv x w s1 p1 d1 g) k s p c i))) :qid conv1x1_avgpool :pattern ((Conv (AvgPool x k s p c i) w s1 p1 d1 g)) :pattern ((AvgPool (Conv x w s1 p1 d1 g) k s p c i)))))

;; axiom: avgpool_cip_nopad
;; group: conv
;; why: Without padding (and without ceil mode, whose last window may overhang) count_include_pad
;;   changes nothing.
(assert (forall ((x T) (k L) (s L) (p L) (c Int) (i Int)) (! (=> (and (= c 0) (= p (zeros (len p)))) (= (AvgPool x k s p c i) (AvgPool x k s p c 1))) :qid avgpool_cip_nopad :pattern ((AvgPool x k s p c i)))))

;; ---------------- pooling ----------------

;; axiom: concat_MaxPool
;; group: pooling
;; why: MaxPool works on each batch item and channel alone, so it commutes with Concat on axis 0 or 1.
(assert (forall ((a T) (b T) (ax Int) (k L) (s L) (p L) (c Int) (i Int)) (! (=> (or (= ax 0) (= ax 1)) (= (MaxPool (Concat a b ax) k s p c i) (Concat (MaxPool a k s p c i) (MaxPool b k s p c i) ax))) :qid concat_MaxPool :pattern ((MaxPool (Concat a b ax) k s p c i)))))

;; axiom: concat_MaxPool_rev
;; group: pooling
;; why: The reverse of concat_MaxPool for inputs whose other extents agree.
(assert (forall ((a T) (b T) (ax Int) (k L) (s L) (p L) (c Int) (i Int)) (! (=> (and (or (= ax 0) (= ax 1)) (= (rank a) 4) (= (rank b) 4) (= (dim a 2) (dim b 2)) (= (dim a 3) (dim b 3)) (=> (= ax 0) (= (dim a 1) (dim b 1))) (=> (= ax 1) (= (dim a 0) (dim b 0)))) (= (Concat (MaxPool a k s p c i) (MaxPool b k s p c i) ax) (MaxPool (Concat a b ax) k s p c i))) :qid concat_MaxPool_rev :pattern ((Concat (MaxPool a k s p c i) (MaxPool b k s p c i) ax)))))

;; axiom: transpose_hw_MaxPool
;; group: pooling
;; why: Pooling an image with H and W swapped is pooling it with swapped kernel, strides and pads, then
;;   swapping.
(assert (forall ((x T) (q L) (k L) (s L) (p L) (c Int) (i Int)) (! (=> (and (hwperm q) (= (rank x) 4) (= (len k) 2) (= (len s) 2) (= (len p) 4)) (= (MaxPool (Transpose x q) k s p c i) (Transpose (MaxPool x (swap2 k) (swap2 s) (swap4 p) c i) q))) :qid transpose_hw_MaxPool :pattern ((MaxPool (Transpose x q) k s p c i)))))

;; axiom: transpose_hw_MaxPool_rev
;; group: pooling
;; why: The reverse of transpose_hw_MaxPool.
(assert (forall ((x T) (q L) (k L) (s L) (p L) (c Int) (i Int)) (! (=> (and (hwperm q) (= (rank x) 4) (= (len k) 2) (= (len s) 2) (= (len p) 4)) (= (Transpose (MaxPool x k s p c i) q) (MaxPool (Transpose x q) (swap2 k) (swap2 s) (swap4 p) c i))) :qid transpose_hw_MaxPool_rev :pattern ((Transpose (MaxPool x k s p c i) q)))))

;; axiom: concat_AvgPool
;; group: pooling
;; why: AvgPool works on each batch item and channel alone, so it commutes with Concat on axis 0 or 1.
(assert (forall ((a T) (b T) (ax Int) (k L) (s L) (p L) (c Int) (i Int)) (! (=> (or (= ax 0) (= ax 1)) (= (AvgPool (Concat a b ax) k s p c i) (Concat (AvgPool a k s p c i) (AvgPool b k s p c i) ax))) :qid concat_AvgPool :pattern ((AvgPool (Concat a b ax) k s p c i)))))

;; axiom: concat_AvgPool_rev
;; group: pooling
;; why: The reverse of concat_AvgPool for inputs whose other extents agree.
(assert (forall ((a T) (b T) (ax Int) (k L) (s L) (p L) (c Int) (i Int)) (! (=> (and (or (= ax 0) (= ax 1)) (= (rank a) 4) (= (rank b) 4) (= (dim a 2) (dim b 2)) (= (dim a 3) (dim b 3)) (=> (= ax 0) (= (dim a 1) (dim b 1))) (=> (= ax 1) (= (dim a 0) (dim b 0)))) (= (Concat (AvgPool a k s p c i) (AvgPool b k s p c i) ax) (AvgPool (Concat a b ax) k s p c i))) :qid concat_AvgPool_rev :pattern ((Concat (AvgPool a k s p c i) (AvgPool b k s p c i) ax)))))

;; axiom: transpose_hw_AvgPool
;; group: pooling
;; why: Pooling an image with H and W swapped is pooling it with swapped kernel, strides and pads, then
;;   swapping.
(assert (forall ((x T) (q L) (k L) (s L) (p L) (c Int) (i Int)) (! (=> (and (hwperm q) (= (rank x) 4) (= (len k) 2) (= (len s) 2) (= (len p) 4)) (= (AvgPool (Transpose x q) k s p c i) (Transpose (AvgPool x (swap2 k) (swap2 s) (swap4 p) c i) q))) :qid transpose_hw_AvgPool :pattern ((AvgPool (Transpose x q) k s p c i)))))

;; axiom: transpose_hw_AvgPool_rev
;; group: pooling
;; why: The reverse of transpose_hw_AvgPool.
(assert (forall ((x T) (q L) (k L) (s L) (p L) (c Int) (i Int)) (! (=> (and (hwperm q) (= (rank x) 4) (= (len k) 2) (= (len s) 2) (= (len p) 4)) (= (Transpose (AvgPool x k s p c i) q) (AvgPool (Transpose x q) (swap2 k) (swap2 s) (swap4 p) c i))) :qid transpose_hw_AvgPool_rev :pattern ((Transpose (AvgPool x k s p c i) q)))))

;; axiom: maxpool_smul
;; group: pooling
;; why: max(u x) = u max(x) for u >= 0 (padding is -infinity, and every window holds an input element).
(assert (forall ((x T) (u Real) (k L) (s L) (p L) (c Int) (i Int)) (! (=> (>= u 0.0) (= (MaxPool (SMul x u) k s p c i) (SMul (MaxPool x k s p c i) u))) :qid maxpool_smul :pattern ((MaxPool (SMul x u) k s p c i)) :pattern ((SMul (MaxPool x k s p c i) u)))))

;; axiom: avgpool_smul
;; group: pooling
;; why: Averaging is linear (zero padding scales to zero).
(assert (forall ((x T) (u Real) (k L) (s L) (p L) (c Int) (i Int)) (! (= (AvgPool (SMul x u) k s p c i) (SMul (AvgPool x k s p c i) u)) :qid avgpool_smul :pattern ((AvgPool (SMul x u) k s p c i)) :pattern ((SMul (AvgPool x k s p c i) u)))))

;; axiom: avgpool_add
;; group: pooling
;; why: Averaging is linear.
(assert (forall ((x T) (y T) (k L) (s L) (p L) (c Int) (i Int)) (! (=> (or (= (shape x) (shape y)) (same4 x y)) (= (AvgPool (Add x y) k s p c i) (Add (AvgPool x k s p c i) (AvgPool y k s p c i)))) :qid avgpool_add :pattern ((AvgPool (Add x y) k s p c i)) :pattern ((Add (AvgPool x k s p c i) (AvgPool y k s p c i))))))

;; axiom: avgpool_mul_channel
;; group: pooling
;; why: Scaling a channel by a constant scales its averages.
(assert (forall ((x T) (b T) (k L) (s L) (p L) (c Int) (i Int)) (! (=> (or (perchannel b x) (chanflat4 b x)) (= (AvgPool (Mul x b) k s p c i) (Mul (AvgPool x k s p c i) b))) :qid avgpool_mul_channel :pattern ((AvgPool (Mul x b) k s p c i)) :pattern ((Mul (AvgPool x k s p c i) b)))))

;; axiom: maxpool_add_channel
;; group: pooling
;; why: Shifting a channel by a constant shifts its maxima (-infinity padding stays -infinity).
(assert (forall ((x T) (b T) (k L) (s L) (p L) (c Int) (i Int)) (! (=> (or (= (rank b) 0) (perchannel b x) (chanflat4 b x)) (= (MaxPool (Add x b) k s p c i) (Add (MaxPool x k s p c i) b))) :qid maxpool_add_channel :pattern ((MaxPool (Add x b) k s p c i)) :pattern ((Add (MaxPool x k s p c i) b)))))

;; axiom: avgpool_add_channel
;; group: pooling
;; why: Shifting a channel by a constant shifts its averages, when padded zeros are not counted
;;   (count_include_pad 0) or there are none.
(assert (forall ((x T) (b T) (k L) (s L) (p L) (c Int) (i Int)) (! (=> (and (or (= (rank b) 0) (perchannel b x) (chanflat4 b x)) (or (= i 0) (and (= c 0) (= p (zeros (len p)))))) (= (AvgPool (Add x b) k s p c i) (Add (AvgPool x k s p c i) b))) :qid avgpool_add_channel :pattern ((AvgPool (Add x b) k s p c i)) :pattern ((Add (AvgPool x k s p c i) b)))))

;; axiom: maxpool_biasadd
;; group: pooling
;; why: Shifting a channel by a constant shifts its maxima (-infinity padding stays -infinity); pooling
;;   keeps the channel axis, so the bias stays per channel.
(assert (forall ((x T) (b T) (k L) (s L) (p L) (c Int) (i Int)) (! (= (MaxPool (BiasAdd x b) k s p c i) (BiasAdd (MaxPool x k s p c i) b)) :qid maxpool_biasadd :pattern ((MaxPool (BiasAdd x b) k s p c i)) :pattern ((BiasAdd (MaxPool x k s p c i) b)))))

;; axiom: avgpool_biasadd
;; group: pooling
;; why: avgpool_add_channel for a bias: shifting a channel by a constant shifts its averages, when
;;   padded zeros are not counted (count_include_pad 0) or there are none.
(assert (forall ((x T) (b T) (k L) (s L) (p L) (c Int) (i Int)) (! (=> (or (= i 0) (and (= c 0) (= p (zeros (len p))))) (= (AvgPool (BiasAdd x b) k s p c i) (BiasAdd (AvgPool x k s p c i) b))) :qid avgpool_biasadd :pattern ((AvgPool (BiasAdd x b) k s p c i)) :pattern ((BiasAdd (AvgPool x k s p c i) b)))))

;; axiom: transpose_batchnorm
;; group: pooling
;; why: BatchNorm is element-wise per channel, so it commutes with a Transpose that keeps the channel
;;   axis in place.
(assert (forall ((x T) (q L) (s T) (b T) (m T) (v T) (e Real)) (! (=> (and (= (len q) (rank x)) (>= (rank x) 2) (= (nth q 1) 1)) (= (BatchNorm (Transpose x q) s b m v e) (Transpose (BatchNorm x s b m v e) q))) :qid transpose_batchnorm :pattern ((BatchNorm (Transpose x q) s b m v e)) :pattern ((Transpose (BatchNorm x s b m v e) q)))))

;; axiom: concat_batchnorm
;; group: pooling
;; why: BatchNorm is element-wise per channel, so it commutes with Concat on any axis but the channel
;;   axis.
(assert (forall ((a T) (c T) (ax Int) (s T) (b T) (m T) (v T) (e Real)) (! (=> (and (>= ax 0) (not (= ax 1))) (= (BatchNorm (Concat a c ax) s b m v e) (Concat (BatchNorm a s b m v e) (BatchNorm c s b m v e) ax))) :qid concat_batchnorm :pattern ((BatchNorm (Concat a c ax) s b m v e)) :pattern ((Concat (BatchNorm a s b m v e) (BatchNorm c s b m v e) ax)))))

;; ---------------- per-channel ----------------

;; axiom: conv_add_bias
;; group: per-channel
;; why: Adding a [K, 1, ..., 1] tensor (one rank less than the output) to a convolution's output adds
;;   b[k] to output channel k: a bias. (Only with exactly rank - 1 dims: broadcasting aligns trailing
;;   dims, so another rank would line b up with other axes.)
(assert (forall ((x T) (w T) (s L) (p L) (d L) (g Int) (b T)) (! (=> (and (= (rank x) (rank w)) (>= (rank x) 3) (= (shape b) (cons (dim w 0) (ones (- (rank x) 2))))) (= (Add (Conv x w s p d g) b) (BiasAdd (Conv x w s p d g) (Reshape b (l1 (dim w 0)))))) :qid conv_add_bias :pattern ((Add (Conv x w s p d g) b)))))

;; axiom: conv_add_bias_rev
;; group: per-channel
;; why: The reverse of conv_add_bias.
(assert (forall ((x T) (w T) (s L) (p L) (d L) (g Int) (b T) (r L)) (! (=> (and (= (rank x) (rank w)) (>= (rank x) 3) (= r (l1 (dim w 0))) (= (shape b) (cons (dim w 0) (ones (- (rank x) 2))))) (= (BiasAdd (Conv x w s p d g) (Reshape b r)) (Add (Conv x w s p d g) b))) :qid conv_add_bias_rev :pattern ((BiasAdd (Conv x w s p d g) (Reshape b r))))))

;; axiom: biasadd_biasadd
;; group: per-channel
;; why: Two per-channel biases add up.
(assert (forall ((y T) (b T) (c T)) (! (=> (= (shape b) (shape c)) (= (BiasAdd (BiasAdd y b) c) (BiasAdd y (Add b c)))) :qid biasadd_biasadd :pattern ((BiasAdd (BiasAdd y b) c)))))

;; axiom: add_conv_biasadd
;; group: per-channel
;; why: Adding a convolution's output to a per-channel-biased tensor of the same rank and channel
;;   count, or biasing the sum, is the same: the bias is added to every element of its channel either
;;   way, and broadcasting the other axes does not move the channel axis. (Stated for a Conv operand
;;   only: the general form set off a chain of instantiations that slowed other proofs.)
(assert (forall ((x T) (w T) (s L) (p L) (d L) (g Int) (y T) (b T)) (! (=> (and (= (rank y) (rank (Conv x w s p d g))) (= (dim y 1) (dim (Conv x w s p d g) 1))) (= (Add (Conv x w s p d g) (BiasAdd y b)) (BiasAdd (Add (Conv x w s p d g) y) b))) :qid add_conv_biasadd :pattern ((Add (Conv x w s p d g) (BiasAdd y b))))))

;; axiom: add_biasadd_biasadd
;; group: per-channel
;; why: The sum of two per-channel-biased tensors of one rank and channel count is their sum biased
;;   by the sum of the biases.
(assert (forall ((a T) (b T) (c T) (e T)) (! (=> (and (= (rank a) (rank c)) (= (dim a 1) (dim c 1)) (= (rank b) 1) (= (rank e) 1) (= (dim b 0) (dim e 0))) (= (Add (BiasAdd a b) (BiasAdd c e)) (BiasAdd (Add a c) (Add b e)))) :qid add_biasadd_biasadd :pattern ((Add (BiasAdd a b) (BiasAdd c e))))))

;; axiom: smul_biasadd
;; group: per-channel
;; why: (y + b)u = yu + bu per channel; SMul keeps shapes, so the bias still has one value per channel.
(assert (forall ((y T) (b T) (u Real)) (! (= (SMul (BiasAdd y b) u) (BiasAdd (SMul y u) (SMul b u))) :qid smul_biasadd :pattern ((SMul (BiasAdd y b) u)) :pattern ((BiasAdd (SMul y u) (SMul b u))))))

;; axiom: transpose_hw_biasadd
;; group: per-channel
;; why: Swapping the last two axes of a rank-4 tensor leaves the channel axis (1) in place, so a
;;   per-channel bias commutes with it.
(assert (forall ((y T) (b T) (q L)) (! (=> (and (hwperm q) (= (rank y) 4)) (= (Transpose (BiasAdd y b) q) (BiasAdd (Transpose y q) b))) :qid transpose_hw_biasadd :pattern ((Transpose (BiasAdd y b) q)) :pattern ((BiasAdd (Transpose y q) b)))))

;; axiom: nhwc_add_biasadd
;; group: per-channel
;; why: After perm [0, 2, 3, 1] the channels are the last axis, where a rank-1 tensor of C values
;;   broadcasts: adding it is adding a per-channel bias before the transpose.
(assert (forall ((y T) (b T) (q L)) (! (=> (and (= q (l4 0 2 3 1)) (= (rank y) 4) (= (rank b) 1) (= (dim b 0) (dim y 1))) (= (Add b (Transpose y q)) (Transpose (BiasAdd y b) q))) :qid nhwc_add_biasadd :pattern ((Add b (Transpose y q))) :pattern ((Transpose (BiasAdd y b) q)))))

;; axiom: chmul_biasadd
;; group: per-channel
;; why: (y + b) k = yk + bk per channel.
(assert (forall ((y T) (b T) (k T)) (! (=> (= (shape b) (shape k)) (= (ChMul (BiasAdd y b) k) (BiasAdd (ChMul y k) (Mul b k)))) :qid chmul_biasadd :pattern ((ChMul (BiasAdd y b) k)))))

;; axiom: biasadd_concat_batch
;; group: per-channel
;; why: Stacking batch items (axis 0) keeps the channel axis, so a per-channel bias adds to each part.
(assert (forall ((y T) (z T) (b T) (ax Int)) (! (=> (and (= ax 0) (>= (rank y) 2)) (= (BiasAdd (Concat y z ax) b) (Concat (BiasAdd y b) (BiasAdd z b) ax))) :qid biasadd_concat_batch :pattern ((BiasAdd (Concat y z ax) b)) :pattern ((Concat (BiasAdd y b) (BiasAdd z b) ax)))))

;; axiom: biasadd_concat
;; group: per-channel
;; why: Biases of stacked channels are stacked biases.
(assert (forall ((y T) (z T) (b T) (c T) (ax Int) (bx Int)) (! (=> (and (= ax 1) (= bx 0) (= (dim y 1) (dim b 0))) (= (BiasAdd (Concat y z ax) (Concat b c bx)) (Concat (BiasAdd y b) (BiasAdd z c) 1))) :qid biasadd_concat :pattern ((BiasAdd (Concat y z ax) (Concat b c bx))))))

;; axiom: biasadd_concat_rev
;; group: per-channel
;; why: The reverse of biasadd_concat.
(assert (forall ((y T) (z T) (b T) (c T) (ax Int)) (! (=> (and (= ax 1) (= (rank b) 1) (= (rank c) 1)) (= (Concat (BiasAdd y b) (BiasAdd z c) ax) (BiasAdd (Concat y z 1) (Concat b c 0)))) :qid biasadd_concat_rev :pattern ((Concat (BiasAdd y b) (BiasAdd z c) ax)))))

;; axiom: batchnorm_affine
;; group: per-channel
;; why: Inference BatchNorm is (y - m) / sqrt(v + eps) * s + b per channel: y k + (b - m k) with k = s /
;;   sqrt(v + eps).
(assert (forall ((y T) (s T) (b T) (m T) (v T) (e Real)) (! (=> (>= (rank y) 2) (let ((k (Div s (Sqrt (Add v (Const 0 nil 0 e)))))) (= (BatchNorm y s b m v e) (BiasAdd (ChMul y k) (Sub b (Mul m k)))))) :qid batchnorm_affine :pattern ((BatchNorm y s b m v e)))))
