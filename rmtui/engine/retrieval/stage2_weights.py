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
    coef=(-0.0756429, 0.596218, -0.299236, -0.132908, 0.317931, 0.344225, 0.0368545, -0.347446, -0.522941, -0.537043, 0.161153, 0.282231, 0.272032, -0.0598008, -0.552723, 0.150181, 0.0878797, -0.216513, -0.531869, -0.432959, -0.246691, -0.0390901, 0.0433551, 0.390771, 0.300035, 0.544306, -0.371047, 0.059544, -0.0225784, 0.349537, 0.107353,),
)

#: with token states
TOKENS = Weights(
    features=('own', 'window', 'lexical', 'dense', 'dense_gap', 'dense_prev', 'dense_next', 'own_prev', 'own_next', 'fused', 'heading_fused', 'heading_dense', 'coverage', 'length', 'own_top', 'need_words', 'fused_prev', 'fused_next', 'rank_fused', 'rank_dense', 'rank_lexical', 'centroid', 'first', 'own_raw', 'lexical_prev', 'lexical_next', 'coherence_prev', 'coherence_next', 'lead', 'subject', 'context_cover', 'maxsim'),
    mean=(0.248819, 0.333704, 0.285732, 0.382142, -0.226334, 0.20534, 0.209481, 0.126458, 0.122082, 0.586363, 0.720017, 0.481006, 0.173487, 4.89554, 1.62922, 4.96444, 0.356053, 0.360752, 3.14379, 3.79215, 3.63165, 0.576116, 0.449145, 0.976644, 0.162596, 0.159165, 0.502884, 0.517161, 0.159087, 0.464005, 0.0222896, 0.415985,),
    scale=(0.248407, 0.297795, 0.242617, 0.126433, 0.114118, 0.124893, 0.12166, 0.176591, 0.169375, 0.178238, 0.244003, 0.119703, 0.172779, 0.57768, 0.337144, 1.56796, 0.186549, 0.17765, 0.893252, 1.36263, 1.30663, 0.13818, 0.15743, 1.02063, 0.178406, 0.171941, 0.182133, 0.17013, 0.365757, 0.498703, 0.0522719, 0.094643,),
    coef=(-0.271787, 0.575746, -0.155096, -1.08214, 0.297036, 0.31907, -0.0242373, -0.256634, -0.450221, -0.555343, 0.122301, 0.255083, 0.0825641, -0.311484, -0.62271, 0.335211, 0.154835, 0.00351363, -0.560563, -0.458091, -0.233401, -0.0469802, 0.0497332, 0.343844, 0.143197, 0.334309, -0.361069, 0.0092513, 0.0437144, 0.253688, 0.214595, 1.18738,),
)
