"""Weights of the learned second stage, written by bench/fit_stage2.py (do not edit by hand).

Fitted on 1768 development questions (106080 candidate rows) from locomo/first, locomo/heading, locomo/inside,
locomo/last, notes; held out: LoCoMo conv-42, conv-43 (every layout) and the notes project(s) rightmemory.
"""

from rmtui.engine.retrieval.stage2_model import Weights

#: without token states
PLAIN = Weights(
    features=(
        'own', 'window', 'lexical', 'dense', 'dense_gap', 'dense_prev', 'dense_next', 'own_prev', 'own_next', 'fused',
        'heading_fused', 'heading_dense', 'coverage', 'length', 'own_top', 'need_words', 'fused_prev', 'fused_next',
        'rank_fused', 'rank_dense', 'rank_lexical', 'centroid', 'first', 'own_raw', 'lexical_prev', 'lexical_next',
        'coherence_prev', 'coherence_next', 'lead', 'subject', 'context_cover',
    ),
    mean=(
        0.241071, 0.332414, 0.280081, 0.374863, -0.232598, 0.202653, 0.206763, 0.122969, 0.119238, 0.578652, 0.717881,
        0.475535, 0.164859, 4.90817, 1.60513, 5.01527, 0.352825, 0.357915, 3.1438, 3.75214, 3.57839, 0.575048, 0.453075,
        0.932278, 0.159816, 0.156992, 0.501007, 0.515485, 0.144881, 0.597417, 0.0220915,
    ),
    scale=(
        0.249417, 0.297202, 0.242757, 0.141601, 0.119965, 0.129504, 0.126154, 0.176813, 0.170053, 0.197118, 0.259711,
        0.136951, 0.170316, 0.550531, 0.340521, 1.54762, 0.194382, 0.18578, 0.893257, 1.34869, 1.28562, 0.15124,
        0.164876, 1.00835, 0.178485, 0.172357, 0.186203, 0.174442, 0.351981, 0.490418, 0.0516803,
    ),
    coef=(
        0.0491794, 0.803261, -0.168723, 0.577828, 0.682038, 0.352002, 0.326446, -0.370574, -0.353535, -0.460022,
        0.307342, 0.140107, 0.476495, 0.219179, 3.09122e-15, 1.38959e-15, 0.222306, -0.44154, -0.204408, 0.0787451,
        -0.0829226, -0.0340533, -0.00567686, 0.0339958, 0.432119, 0.445465, -0.550839, 0.0656648, -0.00940882, 0.684512,
        0.170992,
    ),
)

#: with token states
TOKENS = Weights(
    features=(
        'own', 'window', 'lexical', 'dense', 'dense_gap', 'dense_prev', 'dense_next', 'own_prev', 'own_next', 'fused',
        'heading_fused', 'heading_dense', 'coverage', 'length', 'own_top', 'need_words', 'fused_prev', 'fused_next',
        'rank_fused', 'rank_dense', 'rank_lexical', 'centroid', 'first', 'own_raw', 'lexical_prev', 'lexical_next',
        'coherence_prev', 'coherence_next', 'lead', 'subject', 'context_cover', 'maxsim',
    ),
    mean=(
        0.241071, 0.332414, 0.280081, 0.374863, -0.232598, 0.202653, 0.206763, 0.122969, 0.119238, 0.578652, 0.717881,
        0.475535, 0.164859, 4.90817, 1.60513, 5.01527, 0.352825, 0.357915, 3.1438, 3.75214, 3.57839, 0.575048, 0.453075,
        0.932278, 0.159816, 0.156992, 0.501007, 0.515485, 0.144881, 0.597417, 0.0220915, 0.408697,
    ),
    scale=(
        0.249417, 0.297202, 0.242757, 0.141601, 0.119965, 0.129504, 0.126154, 0.176813, 0.170053, 0.197118, 0.259711,
        0.136951, 0.170316, 0.550531, 0.340521, 1.54762, 0.194382, 0.18578, 0.893257, 1.34869, 1.28562, 0.15124,
        0.164876, 1.00835, 0.178485, 0.172357, 0.186203, 0.174442, 0.351981, 0.490418, 0.0516803, 0.106572,
    ),
    coef=(
        -0.140831, 0.718909, -0.170714, -0.0484302, -0.0571647, 0.376997, 0.334586, -0.412632, -0.407591, -0.399474,
        0.296207, 0.0798738, 0.165397, -0.0755176, 2.91765e-15, -4.85999e-15, 0.206316, -0.498776, -0.273392, 0.083731,
        -0.0966706, -0.0616488, -0.00933739, -0.0152775, 0.48263, 0.537431, -0.575002, 0.0733898, 0.0418446, 0.625191,
        0.256839, 1.93079,
    ),
)
