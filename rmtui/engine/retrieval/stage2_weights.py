"""Weights of the learned second stage, written by bench/fit_stage2.py (do not edit by hand).

Fitted on 1675 development questions (100500 candidate rows) from locomo/first, locomo/heading, locomo/inside,
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
        0.246415, 0.334796, 0.284666, 0.387001, -0.225045, 0.209051, 0.213364, 0.125111, 0.121278, 0.592438, 0.730708,
        0.486108, 0.169735, 4.91345, 1.61435, 4.99403, 0.361467, 0.366871, 3.1438, 3.78112, 3.60449, 0.587627, 0.463891,
        0.958439, 0.162144, 0.159276, 0.505504, 0.520745, 0.152567, 0.62407, 0.0218567,
    ),
    scale=(
        0.249128, 0.297403, 0.242553, 0.132043, 0.113879, 0.128158, 0.124374, 0.177617, 0.170622, 0.186494, 0.252098,
        0.128406, 0.171695, 0.562548, 0.341272, 1.56528, 0.192154, 0.182709, 0.893258, 1.3606, 1.29872, 0.139119,
        0.157503, 1.01398, 0.179245, 0.172886, 0.184444, 0.171624, 0.35957, 0.484362, 0.0516174,
    ),
    coef=(
        -0.183588, 0.632675, 0.138618, -0.177603, 0.533088, 0.38637, 0.313296, -0.449818, -0.375408, -0.586899,
        0.231365, 0.212014, 0.175638, 0.218925, -0.474201, 0.0660864, 0.0266973, -0.719086, -0.443237, -0.402054,
        -0.112025, -0.0921881, 0.0830646, 0.347123, 0.610412, 0.59116, -0.527022, 0.154569, 0.0122057, 0.63124,
        0.00301651,
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
        0.246415, 0.334796, 0.284666, 0.387001, -0.225045, 0.209051, 0.213364, 0.125111, 0.121278, 0.592438, 0.730708,
        0.486108, 0.169735, 4.91345, 1.61435, 4.99403, 0.361467, 0.366871, 3.1438, 3.78112, 3.60449, 0.587627, 0.463891,
        0.958439, 0.162144, 0.159276, 0.505504, 0.520745, 0.152567, 0.62407, 0.0218567, 0.417035,
    ),
    scale=(
        0.249128, 0.297403, 0.242553, 0.132043, 0.113879, 0.128158, 0.124374, 0.177617, 0.170622, 0.186494, 0.252098,
        0.128406, 0.171695, 0.562548, 0.341272, 1.56528, 0.192154, 0.182709, 0.893258, 1.3606, 1.29872, 0.139119,
        0.157503, 1.01398, 0.179245, 0.172886, 0.184444, 0.171624, 0.35957, 0.484362, 0.0516174, 0.100243,
    ),
    coef=(
        -0.242079, 0.681001, 0.14292, -1.2942, 0.622526, 0.299412, 0.126823, -0.330905, -0.300227, -0.63429, 0.198499,
        0.173406, -0.046138, -0.0185104, -0.49462, 0.291246, 0.177991, -0.303715, -0.436083, -0.351272, -0.113566,
        -0.110876, 0.0784036, 0.266418, 0.380955, 0.314075, -0.511083, 0.0658737, 0.0236068, 0.575672, 0.112329,
        1.46696,
    ),
)
