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
        'coherence_prev', 'coherence_next', 'lead', 'subject', 'context_cover', 'node_cover',
    ),
    mean=(
        0.246415, 0.334796, 0.284666, 0.387001, -0.225045, 0.209051, 0.213364, 0.125111, 0.121278, 0.592438, 0.730708,
        0.486108, 0.169735, 4.91345, 1.61435, 4.99403, 0.361467, 0.366871, 3.1438, 3.78112, 3.60449, 0.587627, 0.463891,
        0.958439, 0.162144, 0.159276, 0.505504, 0.520745, 0.152567, 0.62407, 0.0218567, 0.169658,
    ),
    scale=(
        0.249128, 0.297403, 0.242553, 0.132043, 0.113879, 0.128158, 0.124374, 0.177617, 0.170622, 0.186494, 0.252098,
        0.128406, 0.171695, 0.562548, 0.341272, 1.56528, 0.192154, 0.182709, 0.893258, 1.3606, 1.29872, 0.139119,
        0.157503, 1.01398, 0.179245, 0.172886, 0.184444, 0.171624, 0.35957, 0.484362, 0.0516174, 0.171623,
    ),
    coef=(
        -0.190965, 0.648698, 0.141229, -0.176568, 0.540503, 0.383123, 0.321104, -0.459808, -0.381576, -0.592699,
        0.22937, 0.215339, 0.0736385, 0.228147, -0.475302, 0.0693654, 0.0266384, -0.724706, -0.436885, -0.403828,
        -0.112049, -0.102447, 0.0903216, 0.346642, 0.616349, 0.594876, -0.523443, 0.159699, 0.0105041, 0.631815,
        0.0121112, 0.101353,
    ),
)

#: with token states
TOKENS = Weights(
    features=(
        'own', 'window', 'lexical', 'dense', 'dense_gap', 'dense_prev', 'dense_next', 'own_prev', 'own_next', 'fused',
        'heading_fused', 'heading_dense', 'coverage', 'length', 'own_top', 'need_words', 'fused_prev', 'fused_next',
        'rank_fused', 'rank_dense', 'rank_lexical', 'centroid', 'first', 'own_raw', 'lexical_prev', 'lexical_next',
        'coherence_prev', 'coherence_next', 'lead', 'subject', 'context_cover', 'node_cover', 'maxsim',
    ),
    mean=(
        0.246415, 0.334796, 0.284666, 0.387001, -0.225045, 0.209051, 0.213364, 0.125111, 0.121278, 0.592438, 0.730708,
        0.486108, 0.169735, 4.91345, 1.61435, 4.99403, 0.361467, 0.366871, 3.1438, 3.78112, 3.60449, 0.587627, 0.463891,
        0.958439, 0.162144, 0.159276, 0.505504, 0.520745, 0.152567, 0.62407, 0.0218567, 0.169658, 0.417035,
    ),
    scale=(
        0.249128, 0.297403, 0.242553, 0.132043, 0.113879, 0.128158, 0.124374, 0.177617, 0.170622, 0.186494, 0.252098,
        0.128406, 0.171695, 0.562548, 0.341272, 1.56528, 0.192154, 0.182709, 0.893258, 1.3606, 1.29872, 0.139119,
        0.157503, 1.01398, 0.179245, 0.172886, 0.184444, 0.171624, 0.35957, 0.484362, 0.0516174, 0.171623, 0.100243,
    ),
    coef=(
        -0.24231, 0.669981, 0.162286, -1.24419, 0.617584, 0.338467, 0.154792, -0.374053, -0.354766, -0.690433, 0.189654,
        0.175008, -0.0400222, -0.0223577, -0.507154, 0.270118, 0.18244, -0.378801, -0.441218, -0.339082, -0.105577,
        -0.102422, 0.0852911, 0.290009, 0.425164, 0.42599, -0.543858, 0.076645, 0.0232827, 0.581732, 0.114572,
        -0.0264487, 1.44964,
    ),
)
