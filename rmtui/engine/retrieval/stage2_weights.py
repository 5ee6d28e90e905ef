"""Weights of the learned second stage, written by bench/fit_stage2.py (do not edit by hand).

Fitted on the LoCoMo development conversations (383 questions, 22980 candidate rows); held out: conv-42, conv-43.
"""

FEATURES: tuple[str, ...] = ('own', 'window', 'lexical', 'dense', 'dense_gap', 'dense_prev', 'dense_next', 'own_prev', 'own_next', 'fused', 'heading_fused', 'heading_dense', 'coverage', 'length', 'own_top', 'need_words', 'fused_prev', 'fused_next', 'rank_fused', 'rank_dense', 'rank_lexical', 'centroid', 'first', 'own_raw', 'lexical_prev', 'lexical_next')
MEAN: tuple[float, ...] = (0.247808, 0.329495, 0.283361, 0.392334, -0.231129, 0.289505, 0.294979, 0.173344, 0.167606, 0.610915, 0.793025, 0.525303, 0.176694, 4.90243, 1.63637, 4.91384, 0.5206, 0.526639, 3.1438, 3.85854, 3.65359, 0.592846, 0.46832, 0.979732, 0.223664, 0.218536,)
SCALE: tuple[float, ...] = (0.248076, 0.301061, 0.242953, 0.121782, 0.116642, 0.154468, 0.149019, 0.238352, 0.229629, 0.175212, 0.242001, 0.101267, 0.174834, 0.554956, 0.339477, 1.56175, 0.230347, 0.216199, 0.893255, 1.39221, 1.32462, 0.128955, 0.148876, 1.02895, 0.240753, 0.232913,)
COEF: tuple[float, ...] = (-0.476915, 0.734369, -0.14351, -0.305374, 0.405173, 0.210788, 0.203782, -0.246225, -0.211651, 0.540291, 0.36295, 0.0722299, 0.229144, 0.649006, -0.519644, 0.06943, -0.715636, -0.711252, -0.597989, -0.264049, 0.0797689, -0.187157, -0.0388282, 0.40523, 0.678904, 0.313057,)
