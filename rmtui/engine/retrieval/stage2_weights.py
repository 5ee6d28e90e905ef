"""Weights of the learned second stage, written by bench/fit_stage2.py (do not edit by hand).

Fitted on 1603 development questions (96180 candidate rows) from locomo/first, locomo/heading, locomo/inside, locomo/last, notes;
held out: LoCoMo conv-42, conv-43 (every layout) and the notes project(s) rightmemory.
"""

from rmtui.engine.retrieval.stage2_model import Weights

#: without token states
PLAIN = Weights(
    features=('own', 'window', 'lexical', 'dense', 'dense_gap', 'dense_prev', 'dense_next', 'own_prev', 'own_next', 'fused', 'heading_fused', 'heading_dense', 'coverage', 'length', 'own_top', 'need_words', 'fused_prev', 'fused_next', 'rank_fused', 'rank_dense', 'rank_lexical', 'centroid', 'first', 'own_raw', 'lexical_prev', 'lexical_next', 'coherence_prev', 'coherence_next', 'lead', 'subject', 'context_cover'),
    mean=(0.248819, 0.333704, 0.285732, 0.382142, -0.226334, 0.20534, 0.209481, 0.126458, 0.122082, 0.586363, 0.720017, 0.481006, 0.173487, 4.89554, 1.62922, 4.96444, 0.356053, 0.360752, 3.14379, 3.79215, 3.63165, 0.576116, 0.449145, 0.976644, 0.162596, 0.159165, 0.502884, 0.517161, 0.159087, 0.464005, 0.0222896,),
    scale=(0.248407, 0.297795, 0.242617, 0.126433, 0.114118, 0.124893, 0.12166, 0.176591, 0.169375, 0.178238, 0.244003, 0.119703, 0.172779, 0.57768, 0.337144, 1.56796, 0.186549, 0.17765, 0.893252, 1.36263, 1.30663, 0.13818, 0.15743, 1.02063, 0.178406, 0.171941, 0.182133, 0.17013, 0.365757, 0.498703, 0.0522719,),
    coef=(-0.0952363, 0.672973, -0.23721, -0.119455, 0.298879, 0.260519, 0.0514607, -0.379275, -0.416475, -0.52374, 0.174747, 0.217483, 0.237935, 0.0929739, -0.527748, 0.0939322, 0.2307, -0.182145, -0.493423, -0.370547, -0.197777, -0.0366898, 0.0417216, 0.407518, 0.342203, 0.386943, -0.519588, 0.0773824, -0.0381648, 0.447126, 0.0671757,),
)

#: with token states
TOKENS = Weights(
    features=('own', 'window', 'lexical', 'dense', 'dense_gap', 'dense_prev', 'dense_next', 'own_prev', 'own_next', 'fused', 'heading_fused', 'heading_dense', 'coverage', 'length', 'own_top', 'need_words', 'fused_prev', 'fused_next', 'rank_fused', 'rank_dense', 'rank_lexical', 'centroid', 'first', 'own_raw', 'lexical_prev', 'lexical_next', 'coherence_prev', 'coherence_next', 'lead', 'subject', 'context_cover', 'maxsim'),
    mean=(0.248819, 0.333704, 0.285732, 0.382142, -0.226334, 0.20534, 0.209481, 0.126458, 0.122082, 0.586363, 0.720017, 0.481006, 0.173487, 4.89554, 1.62922, 4.96444, 0.356053, 0.360752, 3.14379, 3.79215, 3.63165, 0.576116, 0.449145, 0.976644, 0.162596, 0.159165, 0.502884, 0.517161, 0.159087, 0.464005, 0.0222896, 0.415985,),
    scale=(0.248407, 0.297795, 0.242617, 0.126433, 0.114118, 0.124893, 0.12166, 0.176591, 0.169375, 0.178238, 0.244003, 0.119703, 0.172779, 0.57768, 0.337144, 1.56796, 0.186549, 0.17765, 0.893252, 1.36263, 1.30663, 0.13818, 0.15743, 1.02063, 0.178406, 0.171941, 0.182133, 0.17013, 0.365757, 0.498703, 0.0522719, 0.094643,),
    coef=(-0.251073, 0.655526, -0.100247, -1.13073, 0.317225, 0.276917, -0.0163235, -0.284414, -0.369796, -0.544938, 0.153514, 0.200387, 0.0554347, -0.160779, -0.571094, 0.316945, 0.245058, 0.00900681, -0.526045, -0.378163, -0.160786, -0.0277486, 0.0337723, 0.325811, 0.196271, 0.228668, -0.498483, 0.025939, 0.0231565, 0.343175, 0.181536, 1.25722,),
)
