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
        'coherence_prev', 'coherence_next', 'lead', 'subject', 'context_cover', 'named_subject',
    ),
    mean=(
        0.241071, 0.332414, 0.280081, 0.374863, -0.232598, 0.202653, 0.206763, 0.122969, 0.119238, 0.578652, 0.717881,
        0.475535, 0.164859, 4.90817, 1.60513, 5.01527, 0.352825, 0.357915, 3.1438, 3.75214, 3.57839, 0.575048, 0.453075,
        0.932278, 0.159816, 0.156992, 0.501007, 0.515485, 0.144881, 0.597417, 0.0220915, 0.58668,
    ),
    scale=(
        0.249417, 0.297202, 0.242757, 0.141601, 0.119965, 0.129504, 0.126154, 0.176813, 0.170053, 0.197118, 0.259711,
        0.136951, 0.170316, 0.550531, 0.340521, 1.54762, 0.194382, 0.18578, 0.893257, 1.34869, 1.28562, 0.15124,
        0.164876, 1.00835, 0.178485, 0.172357, 0.186203, 0.174442, 0.351981, 0.490418, 0.0516803, 0.492429,
    ),
    coef=(
        0.122711, 0.787324, -0.0219419, 0.650222, 0.767489, 0.469328, 0.43076, -0.377093, -0.413012, -0.795279,
        0.399655, 0.143791, 0.446328, 0.177639, 1.51871e-15, 4.36796e-16, 0.217389, -0.419002, -0.150807, 0.113729,
        -0.106652, 0.00825644, -0.00264691, 0.0326114, 0.477203, 0.499411, -0.601217, 0.0126818, -0.00179811, 0.115434,
        0.246871, 1.30863,
    ),
)

#: with token states
TOKENS = Weights(
    features=(
        'own', 'window', 'lexical', 'dense', 'dense_gap', 'dense_prev', 'dense_next', 'own_prev', 'own_next', 'fused',
        'heading_fused', 'heading_dense', 'coverage', 'length', 'own_top', 'need_words', 'fused_prev', 'fused_next',
        'rank_fused', 'rank_dense', 'rank_lexical', 'centroid', 'first', 'own_raw', 'lexical_prev', 'lexical_next',
        'coherence_prev', 'coherence_next', 'lead', 'subject', 'context_cover', 'named_subject', 'maxsim',
    ),
    mean=(
        0.241071, 0.332414, 0.280081, 0.374863, -0.232598, 0.202653, 0.206763, 0.122969, 0.119238, 0.578652, 0.717881,
        0.475535, 0.164859, 4.90817, 1.60513, 5.01527, 0.352825, 0.357915, 3.1438, 3.75214, 3.57839, 0.575048, 0.453075,
        0.932278, 0.159816, 0.156992, 0.501007, 0.515485, 0.144881, 0.597417, 0.0220915, 0.58668, 0.408697,
    ),
    scale=(
        0.249417, 0.297202, 0.242757, 0.141601, 0.119965, 0.129504, 0.126154, 0.176813, 0.170053, 0.197118, 0.259711,
        0.136951, 0.170316, 0.550531, 0.340521, 1.54762, 0.194382, 0.18578, 0.893257, 1.34869, 1.28562, 0.15124,
        0.164876, 1.00835, 0.178485, 0.172357, 0.186203, 0.174442, 0.351981, 0.490418, 0.0516803, 0.492429, 0.106572,
    ),
    coef=(
        -0.0628731, 0.714367, -0.046813, 0.0369526, 0.0436168, 0.475655, 0.433429, -0.418483, -0.470695, -0.724224,
        0.386585, 0.0902847, 0.150363, -0.104297, 1.45429e-15, -6.30947e-16, 0.20931, -0.491854, -0.221692, 0.108451,
        -0.119559, -0.028036, -0.00575412, -0.0170855, 0.520967, 0.606137, -0.615993, 0.0286421, 0.0664288, 0.0965634,
        0.339994, 1.19476, 1.87163,
    ),
)
