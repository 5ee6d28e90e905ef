"""Weights of the learned second stage, written by bench/fit_stage2.py (do not edit by hand).

Fitted on 1844 development questions (110640 candidate rows) from locomo/first, locomo/heading, locomo/inside,
locomo/last, notes; held out: LoCoMo conv-42, conv-43 (every layout) and the notes project(s) rightmemory.
"""

from rmtui.engine.retrieval.stage2_model import Weights

#: without token states
PLAIN = Weights(
    features=(
        'own', 'window', 'lexical', 'dense', 'dense_gap', 'dense_prev', 'dense_next', 'own_prev', 'own_next', 'fused',
        'coverage', 'length', 'fused_prev', 'fused_next', 'rank_fused', 'rank_dense', 'rank_lexical', 'centroid',
        'first', 'own_raw', 'lexical_prev', 'lexical_next', 'coherence_prev', 'coherence_next', 'lead', 'subject',
        'context_cover', 'named_subject', 'own*thread', 'window*thread', 'lexical*thread', 'dense*thread',
        'dense_gap*thread', 'dense_prev*thread', 'dense_next*thread', 'own_prev*thread', 'own_next*thread',
        'fused*thread', 'coverage*thread', 'length*thread', 'fused_prev*thread', 'fused_next*thread',
        'rank_fused*thread', 'rank_dense*thread', 'rank_lexical*thread', 'centroid*thread', 'first*thread',
        'own_raw*thread', 'lexical_prev*thread', 'lexical_next*thread', 'coherence_prev*thread',
        'coherence_next*thread', 'lead*thread', 'subject*thread', 'context_cover*thread', 'named_subject*thread',
    ),
    mean=(
        0.238327, 0.330063, 0.27732, 0.368494, -0.235599, 0.199339, 0.203319, 0.12191, 0.118225, 0.570255, 0.161933,
        4.90087, 0.347526, 0.352449, 3.1438, 3.72967, 3.5617, 0.568484, 0.447062, 0.917366, 0.158393, 0.155591,
        0.498752, 0.513145, 0.139118, 0.576419, 0.0223644, 0.5625, 0.0136925, 0.0170948, 0.0152565, 0.0219728,
        -0.0101957, 0.0125382, 0.012759, 0.00734563, 0.0071286, 0.0327492, 0.00983989, 0.23981, 0.0209926, 0.0211616,
        0.153265, 0.189045, 0.179909, 0.0314486, 0.0253168, 0.0529511, 0.00915952, 0.00895642, 0.0271473, 0.0276356,
        0.00891147, 0.0371352, 0.00131864, 0.0375821,
    ),
    scale=(
        0.248817, 0.297164, 0.242482, 0.144109, 0.121689, 0.12949, 0.126248, 0.17622, 0.16953, 0.2013, 0.168843,
        0.544035, 0.195096, 0.186825, 0.893258, 1.33911, 1.27629, 0.155347, 0.167907, 1.0028, 0.178043, 0.171996,
        0.187774, 0.176591, 0.346069, 0.494126, 0.0518893, 0.496078, 0.0234188, 0.0294704, 0.0246563, 0.0222606,
        0.0142667, 0.0152237, 0.0152595, 0.0157673, 0.0154058, 0.0352882, 0.0158528, 0.26531, 0.0253238, 0.0251422,
        0.179304, 0.220331, 0.206895, 0.0323818, 0.0267335, 0.0863975, 0.017038, 0.0167156, 0.0304863, 0.0304433,
        0.0266826, 0.0448151, 0.00469712, 0.044161,
    ),
    coef=(
        -0.129754, 0.51564, -0.20432, 0.3923, 0.464579, 0.310093, 0.227711, -0.232979, -0.259888, 0.322511, 0.6009,
        0.143913, 0.185836, -0.124827, -0.121458, -0.177593, 0.000868739, 0.107862, -0.0347983, 0.097865, 0.271443,
        0.251191, -0.444316, -0.0766467, -0.0264887, 0.201852, 0.0743833, 1.10594, -0.162086, 0.545286, 0.0196727,
        -0.441112, -0.688275, 0.226553, 0.224703, -0.0905841, 0.0612676, 0.0011617, -0.0454477, 1.38788, 0.217154,
        -0.078793, -0.116571, -0.0397833, 0.184672, 0.226411, -0.0900609, -0.0156202, 0.168704, -0.29137, -0.906528,
        0.0207848, 0.0482472, 0.258426, 0.410171, -0.14346,
    ),
)

#: with token states
TOKENS = Weights(
    features=(
        'own', 'window', 'lexical', 'dense', 'dense_gap', 'dense_prev', 'dense_next', 'own_prev', 'own_next', 'fused',
        'coverage', 'length', 'fused_prev', 'fused_next', 'rank_fused', 'rank_dense', 'rank_lexical', 'centroid',
        'first', 'own_raw', 'lexical_prev', 'lexical_next', 'coherence_prev', 'coherence_next', 'lead', 'subject',
        'context_cover', 'named_subject', 'own*thread', 'window*thread', 'lexical*thread', 'dense*thread',
        'dense_gap*thread', 'dense_prev*thread', 'dense_next*thread', 'own_prev*thread', 'own_next*thread',
        'fused*thread', 'coverage*thread', 'length*thread', 'fused_prev*thread', 'fused_next*thread',
        'rank_fused*thread', 'rank_dense*thread', 'rank_lexical*thread', 'centroid*thread', 'first*thread',
        'own_raw*thread', 'lexical_prev*thread', 'lexical_next*thread', 'coherence_prev*thread',
        'coherence_next*thread', 'lead*thread', 'subject*thread', 'context_cover*thread', 'named_subject*thread',
        'maxsim', 'maxsim*thread',
    ),
    mean=(
        0.238327, 0.330063, 0.27732, 0.368494, -0.235599, 0.199339, 0.203319, 0.12191, 0.118225, 0.570255, 0.161933,
        4.90087, 0.347526, 0.352449, 3.1438, 3.72967, 3.5617, 0.568484, 0.447062, 0.917366, 0.158393, 0.155591,
        0.498752, 0.513145, 0.139118, 0.576419, 0.0223644, 0.5625, 0.0136925, 0.0170948, 0.0152565, 0.0219728,
        -0.0101957, 0.0125382, 0.012759, 0.00734563, 0.0071286, 0.0327492, 0.00983989, 0.23981, 0.0209926, 0.0211616,
        0.153265, 0.189045, 0.179909, 0.0314486, 0.0253168, 0.0529511, 0.00915952, 0.00895642, 0.0271473, 0.0276356,
        0.00891147, 0.0371352, 0.00131864, 0.0375821, 0.404265, 0.0224797,
    ),
    scale=(
        0.248817, 0.297164, 0.242482, 0.144109, 0.121689, 0.12949, 0.126248, 0.17622, 0.16953, 0.2013, 0.168843,
        0.544035, 0.195096, 0.186825, 0.893258, 1.33911, 1.27629, 0.155347, 0.167907, 1.0028, 0.178043, 0.171996,
        0.187774, 0.176591, 0.346069, 0.494126, 0.0518893, 0.496078, 0.0234188, 0.0294704, 0.0246563, 0.0222606,
        0.0142667, 0.0152237, 0.0152595, 0.0157673, 0.0154058, 0.0352882, 0.0158528, 0.26531, 0.0253238, 0.0251422,
        0.179304, 0.220331, 0.206895, 0.0323818, 0.0267335, 0.0863975, 0.017038, 0.0167156, 0.0304863, 0.0304433,
        0.0266826, 0.0448151, 0.00469712, 0.044161, 0.108517, 0.023078,
    ),
    coef=(
        -0.204534, 0.515375, -0.170735, -0.103814, -0.122941, 0.326137, 0.221072, -0.258438, -0.256914, 0.181189,
        0.227942, -0.11548, 0.210479, -0.152129, -0.159351, -0.133195, 8.88133e-07, 0.0699782, -0.0394036, 0.0622026,
        0.289624, 0.289362, -0.468226, -0.0756717, 0.0201464, 0.149069, 0.160507, 1.02408, -0.209723, 0.539927,
        -0.00503386, -0.472215, -0.736806, 0.228036, 0.237188, -0.0901527, 0.0349999, -0.00449376, 0.112382, 1.31957,
        0.162971, -0.0914433, -0.160569, -0.0302875, 0.159881, 0.272514, -0.0885458, -0.0459017, 0.178461, -0.32304,
        -0.889033, 0.00743345, 0.0172689, 0.212106, 0.442032, -0.0992788, 1.75241, 0.299523,
    ),
)
