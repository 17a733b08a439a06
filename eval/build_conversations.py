"""Builds eval/conversations.json: long two-speaker conversations with paraphrased questions.

Run from the repository root: `python eval/build_conversations.py` (stdlib only; the same file on
every run, since every random choice comes from one seeded generator). See eval/README.md for
how the set is made and why it is hard.
"""

from __future__ import annotations

import calendar
import json
import random
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

SEED = 23
CONVERSATIONS = 24
SESSIONS = 12
TURNS_PER_SESSION = (26, 32)
FACT_TOPICS, SPEAKER_TOPICS, MULTI_TOPICS = 5, 3, 3
TEMPORAL_QUESTIONS = 5
DISTRACTORS_PER_SESSION = (7, 10)
HINT_SHARE = 0.5
OUT = Path(__file__).with_name("conversations.json")

NAMES = [
    "Maria", "Dev", "Caroline", "Tomas", "Aisha", "Jonah", "Priya", "Marcus", "Elena", "Kenji",
    "Fatima", "Oliver", "Lucia", "Samir", "Hannah", "Diego", "Mei", "Patrick", "Nadia", "Victor",
    "Ingrid", "Kwame", "Sofia", "Rafael", "Yara", "Liam", "Chloe", "Andrei", "Grace", "Mateo",
    "Leila", "Felix", "Amara", "Hugo", "Rosa", "Theo", "Zainab", "Elliot", "Noor", "Gabriel",
    "Iris", "Omar", "Beatriz", "Stefan", "Lena", "Arjun", "Clara", "Emeka",
]


@dataclass(frozen=True)
class Topic:
    """One kind of life event. `said` are first-person ways to tell it (each a different detail, so
    two speakers can both have the event); `asked` are questions about it that avoid the words of
    `said`; `later` and `asked_both` make it a two-session story; `near` are lines on the same
    subject (same nouns, other facts) that do not answer any question about it."""

    category: str
    said: tuple[str, ...]
    asked: tuple[str, ...]
    later: tuple[str, ...]
    asked_both: tuple[str, ...]
    near: tuple[str, ...]


def topic(category, said, asked, later, asked_both, near) -> Topic:
    return Topic(category, tuple(said), tuple(asked), tuple(later), tuple(asked_both), tuple(near))


TOPICS = {
    "pottery": topic(
        "hobby",
        ["I finally signed up for a pottery class at the community center, the first lesson is Thursday night.",
         "I enrolled in a wheel-throwing course downtown, so every Tuesday I'm getting my hands covered in clay."],
        ["Which craft did {S} take up?", "What hands-on creative pastime did {S} get into?",
         "What kind of ceramics lessons did {S} begin?"],
        ["The mug I threw a few weeks back finally came out of the kiln, and the glaze turned a deep blue."],
        ["What craft did {S} take up, and what was the first piece {S} finished?"],
        ["My aunt collects pottery from Portugal, her whole kitchen is full of it.",
         "The class I wanted at the community center was already full, so I gave up.",
         "We bought a clay pot for the basil on the balcony.",
         "There was a documentary about a pottery village in Japan last night, really calming."]),
    "climbing": topic(
        "hobby",
        ["I started going to the bouldering gym near my office, my forearms are destroyed.",
         "A friend dragged me to an indoor rock climbing wall and now I have a ten-visit pass."],
        ["What sport involving heights did {S} take up?", "Which vertical sport did {S} begin?",
         "What new sport keeps {S} off the ground?"],
        ["I finally sent a V4 problem on the overhang wall, I was shaking at the top."],
        ["What activity did {S} start, and what milestone did {S} reach in it later?"],
        ["My office has a climbing plant that is taking over the whole window.",
         "The gym near my place raised its prices again.",
         "Prices are climbing everywhere, even coffee costs more now.",
         "I watched that free solo film about the climber again."]),
    "cello": topic(
        "hobby",
        ["I rented a cello and booked lessons with a teacher who lives two streets away.",
         "I bought a second-hand violin and I practice scales every evening now."],
        ["What instrument did {S} begin learning?", "Which musical hobby did {S} pick up?",
         "What is {S} being taught to play?"],
        ["My teacher let me play a short Bach minuet at her student recital last weekend."],
        ["What instrument did {S} take up, and how did {S}'s first performance go?"],
        ["The concert hall downtown has a string quartet series this season.",
         "My neighbor practices the trumpet at seven in the morning, it is brutal.",
         "We listened to a lot of classical music on the drive.",
         "I keep meaning to learn an instrument but never do."]),
    "chess": topic(
        "hobby",
        ["I joined a chess club that meets in the back room of the library on Wednesdays.",
         "I have been playing online chess every night and I signed up for a rated tournament."],
        ["What board game has {S} become serious about?", "Which strategy game club did {S} join?",
         "What competitive game is {S} spending evenings on?"],
        ["I won my section at the club tournament, five points out of six."],
        ["What game did {S} get serious about, and how did {S} do in competition later?"],
        ["The library on Main Street is closing for renovation on Wednesdays.",
         "My nephew keeps beating me at checkers, it is humiliating.",
         "We played board games all evening at my cousin's place.",
         "I joined the neighborhood group chat and it is nonstop."]),
    "photography": topic(
        "hobby",
        ["I bought a used film camera and I have been shooting black-and-white rolls around the city.",
         "I got a mirrorless camera and I go out at sunrise to take pictures of birds by the river."],
        ["What visual hobby did {S} get into?", "What has {S} been doing with a new lens?",
         "What artistic pastime took {S} outdoors at first light or into the streets?"],
        ["One of my photos got picked for the local gallery's spring exhibition."],
        ["What hobby did {S} start, and what recognition did {S}'s work get later?"],
        ["My phone camera cracked when I dropped it on the stairs.",
         "We took so many pictures at the wedding, I still have to sort them.",
         "The river path by my place floods every spring.",
         "I printed some old family photos for my grandmother."]),
    "gardening": topic(
        "hobby",
        ["I got a plot at the community garden and planted tomatoes, beans and squash.",
         "I built two raised beds in the backyard and I am growing herbs and peppers."],
        ["What green-thumb hobby did {S} start?", "What is {S} growing these days?",
         "How did {S} begin spending time with soil and seeds?"],
        ["We harvested so many tomatoes that I made twelve jars of sauce."],
        ["What did {S} start growing, and what came of the harvest?"],
        ["The backyard of my building is just concrete and a broken bench.",
         "I bought herbs at the farmers market for the soup.",
         "My mother's garden won a prize at the county fair years ago.",
         "The community center is repainting the hall next week."]),
    "running": topic(
        "hobby",
        ["I registered for the city marathon in the fall, the training plan starts Monday.",
         "I joined a running club that does a ten kilometre loop along the lake every Saturday."],
        ["What endurance goal did {S} commit to?", "What long-distance challenge is {S} preparing for?",
         "What kind of group exercise did {S} join on weekends?"],
        ["I crossed the finish line in four hours and eight minutes, my legs are still shaking."],
        ["What race did {S} commit to, and what was {S}'s finishing time?"],
        ["My car has been running rough since the cold snap.",
         "The lake is frozen over, people are skating on it.",
         "I am running late for everything this week.",
         "My brother ran a half marathon years ago and never stopped talking about it."]),
    "knitting": topic(
        "hobby",
        ["My grandmother taught me to knit and I am halfway through my first scarf.",
         "I started crocheting little amigurumi animals while I watch TV at night."],
        ["What needlework did {S} learn?", "What does {S} make with yarn?",
         "Which fibre craft did {S} pick up?"],
        ["I finished a whole sweater and wore it to the office, nobody believed I made it."],
        ["What yarn craft did {S} learn, and what was the big project {S} completed?"],
        ["My grandmother's house smells like cinnamon all winter.",
         "The cat knocked a basket of yarn off the shelf at my sister's place.",
         "I lost my favorite scarf on the train.",
         "I watch TV at night way too much."]),
    "dog": topic(
        "pet",
        ["We brought home a beagle puppy from the shelter, he chews everything.",
         "We adopted a three-year-old greyhound that retired from racing."],
        ["What breed of dog joined {S}'s household?", "Which canine did {S} take in?",
         "What kind of dog did {S} get?"],
        ["The puppy finished obedience school and he actually sits on command now."],
        ["What animal did {S} adopt, and what training milestone came later?"],
        ["My neighbor's dog barks every time the mail arrives.",
         "The shelter near us is asking for blanket donations.",
         "I had hot dogs at the game, not my finest meal.",
         "We walked past the dog park and it was packed."]),
    "cat": topic(
        "pet",
        ["I finally got a cat, a grey tabby kitten I named Pixel.",
         "A black cat kept showing up at my door, so I took her in and called her Olive."],
        ["What feline did {S} take in?", "What new feline roommate does {S} have?",
         "Which kitty moved into {S}'s apartment?"],
        ["The vet said the kitten is healthy and she has doubled in weight."],
        ["What pet did {S} get, and what did the vet say later?"],
        ["My sister is allergic to cats, so visits are complicated.",
         "The vet clinic on the corner changed owners.",
         "There is a cat cafe opening downtown.",
         "I named my new plant after my old teacher."]),
    "parrot": topic(
        "pet",
        ["I adopted a green parakeet from a coworker who moved abroad.",
         "We got two goldfish and a little tank for the kids' room."],
        ["What small creature did {S} start caring for?", "What pet that needs a cage or tank did {S} get?",
         "Which caged or aquatic pet is {S} looking after?"],
        ["The parakeet learned to whistle the opening of a song from the radio."],
        ["What animal did {S} start keeping, and what trick did it pick up?"],
        ["A coworker of mine moved abroad for a job.",
         "The tank of my car is almost empty again.",
         "Birds wake me up at five every morning.",
         "The kids' room needs a fresh coat of paint."]),
    "lisbon": topic(
        "travel",
        ["We just got back from five days in Lisbon, the custard tarts were unreal.",
         "I spent a week in Kyoto and walked through a thousand red gates at Fushimi Inari."],
        ["Which foreign city did {S} vacation in?", "Which city abroad did {S} visit?",
         "What overseas city trip did {S} take?"],
        ["I framed a picture from that trip and hung it over the couch."],
        ["Where did {S} travel, and what souvenir from it ended up on the wall?"],
        ["My cousin wants to move to Portugal someday.",
         "I bought custard at the store for the trifle.",
         "The airport was chaos when I picked up my parents.",
         "We watched a travel show about Japan."]),
    "camping": topic(
        "travel",
        ["We drove up to Yosemite and camped for four nights next to the river.",
         "I did a three-day backpacking loop in the Smoky Mountains with my brother."],
        ["Where did {S} sleep outdoors?", "What national park trip did {S} do?",
         "Which wilderness outing did {S} go on?"],
        ["We booked the same campsite again for next summer because it was so good."],
        ["Where did {S} go camping, and what plan did {S} make after it?"],
        ["My brother bought a tent and never used it.",
         "The river near my office smells terrible in summer.",
         "I drove four hours for a work meeting last week.",
         "Mountains of laundry are waiting for me."]),
    "roadtrip": topic(
        "travel",
        ["We rented a van and drove the coast highway from San Francisco down to San Diego.",
         "I took a train across the Alps from Zurich to Milan."],
        ["What long journey did {S} make over land?", "Which scenic route did {S} travel?",
         "What trip by road or rail did {S} take?"],
        ["I turned the trip videos into a short film and my family watched it at dinner."],
        ["What overland trip did {S} take, and what did {S} make out of it?"],
        ["The highway near us is closed for repairs.",
         "My train to work was forty minutes late.",
         "We rented a movie and fell asleep halfway.",
         "My family eats dinner at six sharp."]),
    "promotion": topic(
        "work",
        ["My manager told me I'm being promoted to team lead starting next month.",
         "I got the senior analyst title at last, with a raise."],
        ["What step up the ladder did {S} get?", "How did {S}'s rank at the current employer change?",
         "What good news about advancement did {S} share?"],
        ["Leading the team is harder than I thought, I had my first tough performance review to give."],
        ["What new role did {S} get, and what was hard about it later?"],
        ["My manager is going on parental leave.",
         "The company announced a new logo, nobody likes it.",
         "A raise in rent is coming for the whole building.",
         "Our team lunch got moved to Friday."]),
    "newjob": topic(
        "work",
        ["I accepted an offer from a solar energy startup, I start in two weeks.",
         "I quit the bank and took a job at a hospital as a data engineer."],
        ["Where does {S} work now?", "What employer did {S} switch to?",
         "Which company did {S} leave the old job for?"],
        ["Three months in at the new place and I already shipped my first project."],
        ["What new employer did {S} join, and what did {S} accomplish there?"],
        ["The bank closed my branch, I have to go across town now.",
         "My friend works at a hospital and her shifts are brutal.",
         "Solar panels went up on our roof last year.",
         "I start my mornings with a cold shower now."]),
    "bakery": topic(
        "work",
        ["I started selling sourdough at the Saturday farmers market, I sold out by ten.",
         "I opened a small online shop for the candles I make."],
        ["What side business did {S} launch?", "What does {S} sell on the side?",
         "How did {S} start earning extra money?"],
        ["The bakery side gig got a write-up in the local paper and orders tripled."],
        ["What small business did {S} start, and what happened to it later?"],
        ["The farmers market moved to the school parking lot.",
         "I burned the bread again this morning.",
         "I bought candles for the power outage.",
         "Our local paper stopped printing on Mondays."]),
    "move": topic(
        "home",
        ["We signed a lease on a two-bedroom apartment across the river, moving day is the 20th.",
         "We bought a small house with a yard at the edge of town."],
        ["Where did {S} relocate to?", "What new place did {S} get to live in?",
         "How did {S}'s living situation change?"],
        ["We finally unpacked the last box and hung the curtains in the new place."],
        ["What new home did {S} get, and when did {S} feel settled in?"],
        ["The apartment upstairs has been empty for months.",
         "My friend's lease ends in the spring and she is panicking.",
         "The river was beautiful at sunset.",
         "Moving the couch to the other wall changed the whole room."]),
    "renovation": topic(
        "home",
        ["We tore out the old kitchen cabinets, contractors start on the new counters next week.",
         "We are redoing the bathroom, new tiles and a walk-in shower."],
        ["What part of {S}'s home is being remodeled?", "What home improvement project did {S} start?",
         "Which room is {S} fixing up?"],
        ["The kitchen is done, we cooked our first big dinner on the new stove."],
        ["What remodel did {S} begin, and how did it end?"],
        ["The contractors next door start drilling at seven.",
         "I cleaned the bathroom for an hour and it still looks the same.",
         "My kitchen knife is so dull it bends tomatoes.",
         "Tiles in the subway station are all cracked."]),
    "wedding": topic(
        "family",
        ["My sister got engaged, the wedding is going to be in a vineyard next summer.",
         "My brother is getting married and he asked me to give the toast."],
        ["Which relative of {S} is about to tie the knot?", "Which family member of {S} is getting hitched?",
         "Whose marriage announcement did {S} talk about?"],
        ["The ceremony was perfect, I cried through the whole speech."],
        ["Whose wedding did {S} announce, and how was the day itself?"],
        ["My sister painted her whole living room yellow.",
         "We went to a vineyard tour for my birthday, the wine was fine.",
         "My brother is fixing his bike all weekend.",
         "The ring of my phone is so loud I keep scaring myself."]),
    "baby": topic(
        "family",
        ["My sister had a baby girl on Tuesday, so I have a niece now.",
         "My cousin had twins, two boys, and I'm their godparent."],
        ["What new family member arrived for {S}?", "Who was born into {S}'s family?",
         "What birth did {S} celebrate?"],
        ["I babysat my niece for the first time and she slept the whole afternoon."],
        ["Who was born in {S}'s family, and what did {S} do with the child later?"],
        ["My cousin keeps sending baby photos of her friends' kids.",
         "Tuesday is the worst day of my week.",
         "The twins next door are always playing drums.",
         "I slept the whole afternoon on Sunday."]),
    "grandma": topic(
        "family",
        ["We threw my grandmother a surprise ninetieth birthday party with the whole family.",
         "My parents celebrated their fortieth wedding anniversary with a dinner for sixty people."],
        ["What milestone did {S}'s family celebrate?", "What big family party did {S} go to?",
         "Which relatives of {S} marked a special occasion?"],
        ["We made a photo book from that party and gave it to her, she keeps it on the coffee table."],
        ["What family milestone did {S} celebrate, and what gift came out of it?"],
        ["My grandmother's recipe for plum cake is a family secret.",
         "The party next door went on until three.",
         "My parents want to sell the old house.",
         "The whole family is on one phone plan."]),
    "injury": topic(
        "health",
        ["I slipped on the ice and broke my wrist, it's in a cast for six weeks.",
         "I tore a ligament in my knee playing soccer, surgery is on the ninth."],
        ["What injury did {S} suffer?", "How did {S} get hurt?",
         "Which bone or joint did {S} damage?"],
        ["The cast is off and my physical therapist says the bone healed well."],
        ["How did {S} get hurt, and how did recovery turn out?"],
        ["The ice on the sidewalk is treacherous this week.",
         "I broke my favorite mug this morning.",
         "Soccer practice got cancelled because of the rain.",
         "My physical copy of that book is falling apart."]),
    "health": topic(
        "health",
        ["My doctor said my blood pressure is high, so I cut out salt and started walking daily.",
         "I found out I'm allergic to gluten, so I changed my whole diet."],
        ["What did {S}'s physician diagnose?", "What did {S}'s checkup reveal?",
         "Why did {S} overhaul eating habits?"],
        ["My latest checkup came back normal, all that walking paid off."],
        ["What health issue did {S} learn about, and how did the follow-up go?"],
        ["My doctor moved her office to the other side of town.",
         "Salt on the roads ruined my boots.",
         "I changed my phone wallpaper to a picture of the ocean.",
         "Walking to the store takes me twenty minutes."]),
    "car": topic(
        "purchase",
        ["I traded in my old sedan and bought a used electric hatchback.",
         "I bought a motorcycle, a red one, and I'm taking the safety course."],
        ["What motorized vehicle did {S} get?", "What motor vehicle did {S} buy?",
         "Which new set of wheels does {S} own?"],
        ["I drove the new car all the way to the coast on one charge."],
        ["What vehicle did {S} purchase, and what was the first long ride in it?"],
        ["My old sedan is still in my dad's driveway.",
         "Electric bills went up this winter.",
         "The safety course at work was two hours of slides.",
         "Red is my least favorite color for a kitchen."]),
    "bike": topic(
        "purchase",
        ["I bought an e-bike so I can commute without showing up sweaty.",
         "I got a secondhand road bike and I ride it to work along the canal."],
        ["How does {S} commute now?", "What pedal-powered purchase did {S} make?",
         "What did {S} buy for the ride to the office?"],
        ["Someone stole the front wheel off my bike outside the grocery store."],
        ["What did {S} buy for getting to work, and what happened to it?"],
        ["The canal path is closed for construction.",
         "My commute by bus takes almost an hour.",
         "I showed up sweaty to the interview, it was July.",
         "The grocery store near me now has self checkout."]),
    "spanish": topic(
        "learning",
        ["I enrolled in an evening Spanish course, twice a week after work.",
         "I'm learning Japanese with a tutor online, three sessions a week."],
        ["Which language is {S} studying?", "What foreign tongue did {S} start learning?",
         "What is {S} trying to become fluent in?"],
        ["I passed the intermediate language exam on my first try."],
        ["What language did {S} start studying, and what test did {S} pass later?"],
        ["The evening news is all weather these days.",
         "My tutor in high school was terrifying.",
         "There is a Spanish restaurant opening near the station.",
         "I work twice a week from home."]),
    "coding": topic(
        "learning",
        ["I signed up for a twelve-week coding bootcamp, mostly Python and web stuff.",
         "I started an online course in data science with weekly projects."],
        ["What technical training did {S} begin?", "What programming education is {S} getting?",
         "How is {S} trying to switch into software?"],
        ["I built my first web app for the bootcamp demo day, a recipe tracker."],
        ["What course did {S} enroll in, and what did {S} build by the end?"],
        ["Python is my nephew's favorite animal at the zoo.",
         "My course of antibiotics ends on Friday.",
         "The web is full of terrible recipes.",
         "I signed up for the gym and went twice."]),
    "driving": topic(
        "learning",
        ["I booked driving lessons, I am thirty-two and I finally want a license.",
         "I started flying lessons at the little airfield outside town."],
        ["What is {S} learning to operate?", "What kind of license is {S} working toward?",
         "Which lessons did {S} book to get behind the controls?"],
        ["I passed the test, the examiner said my parallel parking was perfect."],
        ["What did {S} start learning to do, and how did the exam go?"],
        ["My license plate fell off on the highway.",
         "The little airfield hosts an air show in August.",
         "Parking downtown costs a fortune now.",
         "Lessons at my kid's school start at eight."]),
    "volunteer": topic(
        "volunteering",
        ["I started volunteering at the food bank on Sunday mornings, sorting donations.",
         "I signed up to walk dogs at the animal shelter every other weekend."],
        ["How does {S} give back to the community?", "What unpaid work did {S} take on?",
         "Where does {S} help out for free?"],
        ["The food bank made me a shift coordinator, I run the Sunday crew now."],
        ["Where did {S} begin giving time for free, and what role came with it later?"],
        ["Sunday mornings are for sleeping in.",
         "We donated old clothes to the church.",
         "The bank sent me a new card, the old one expired.",
         "Sorting my emails took all afternoon."]),
}

# questions that keep one word of the evidence (per `said` variant): a keyword index has something
# to hold on to, and so do the `near` lines that share that word
HINTED = {
    "pottery": (["What class did {S} join at the neighborhood hall?"], ["What does {S} do with clay each week?"]),
    "climbing": (["What did {S} take up at a gym by work?"], ["What kind of wall did {S} get a pass for?"]),
    "cello": (["What did {S} rent to learn music?"], ["Why does {S} practice scales at night?"]),
    "chess": (["Which library club did {S} become a member of?"], ["What tournament did {S} enter online?"]),
    "photography": (["What did {S} shoot with an old camera?"], ["What does {S} take pictures of at dawn?"]),
    "gardening": (["What did {S} sow at the shared plot?"], ["What is in {S}'s raised beds?"]),
    "running": (["Which marathon did {S} enter?"], ["Which club does {S} jog with around the lake?"]),
    "knitting": (["What did {S} learn from a grandmother?"], ["What does {S} crochet in front of the TV?"]),
    "dog": (["What did {S} bring home from the shelter?"], ["What animal that used to race did {S} give a home to?"]),
    "cat": (["What is the name of {S}'s kitten?"], ["Which stray did {S} take in and name?"]),
    "parrot": (["What bird did {S} get from a coworker?"], ["What swims in the tank in {S}'s children's room?"]),
    "lisbon": (["What did {S} eat a lot of during the trip to Portugal?"],
               ["Which shrine with many gates did {S} visit?"]),
    "camping": (["Where did {S} camp by a river?"], ["Which mountains did {S} trek through with a sibling?"]),
    "roadtrip": (["Which coast did {S} tour in a camper?"], ["Which mountains did {S} cross by train?"]),
    "promotion": (["What did {S}'s manager announce about the team?"],
                  ["What title did {S} earn along with more pay?"]),
    "newjob": (["Which startup is {S} joining?"], ["What job did {S} take at a hospital?"]),
    "bakery": (["What does {S} sell at the farmers market?"], ["What does {S} sell in an online shop?"]),
    "move": (["What lease did {S} sign?"], ["What kind of house did {S} buy?"]),
    "renovation": (["What is being redone in {S}'s kitchen?"], ["What is new in {S}'s bathroom?"]),
    "wedding": (["Which of {S}'s siblings chose a vineyard for the ceremony?"],
                ["Whose wedding will {S} make a toast at?"]),
    "baby": (["Who did {S}'s sister give birth to?"], ["Whose newborn twins did {S} become a sponsor for?"]),
    "grandma": (["How old did {S}'s grandmother turn?"], ["Which anniversary did {S}'s mom and dad mark?"]),
    "injury": (["How did {S} end up in a cast?"], ["What happened to {S}'s knee?"]),
    "health": (["What did {S}'s doctor find?"], ["What is {S} allergic to?"]),
    "car": (["What electric car did {S} get?"], ["What did {S} buy that needs a safety course?"]),
    "bike": (["Why did {S} get an e-bike?"], ["What does {S} pedal beside the canal?"]),
    "spanish": (["Which evening class is {S} taking?"], ["What is {S} studying with a remote tutor?"]),
    "coding": (["What bootcamp did {S} join?"], ["What online program with assignments is {S} taking?"]),
    "driving": (["What lessons did {S} book at thirty-two?"], ["What is {S} learning at the airfield?"]),
    "volunteer": (["What does {S} do at the food bank?"], ["What does {S} do at the animal shelter?"]),
}

# lines that share the words a question keeps (see HINTED, and the two-session questions) but
# state another fact: matching those words is not enough to find the evidence
ECHOES = {
    "pottery": ["The neighborhood hall is hosting a class on tax forms.",
                "My piano lessons as a kid were torture.",
                "I finished the puzzle, the first piece I placed was a corner."],
    "climbing": ["Our gym at work is just two treadmills by the copier.",
                 "I got a pass for the museum, the wall of old maps is great."],
    "cello": ["The rental office lost our paperwork again.",
              "My nephew practices scales on the piano and the whole house suffers."],
    "chess": ["The library club for teens does movie nights now.",
              "My brother entered a tournament for darts online, of all things."],
    "photography": ["I found an old camera of my dad's, it doesn't work.",
                    "Birds outside my window at dawn are so loud."],
    "gardening": ["The harvest festival in town is next weekend.",
                  "The plot of that movie made no sense at all.",
                  "My nephew is growing so fast, he is taller than me.",
                  "My neighbor's raised beds are full of weeds."],
    "running": ["My cousin's finishing time at the swim meet was great.",
                "The club around the lake has a new clubhouse."],
    "knitting": ["My grandmother still watches the same TV quiz show every night.",
                 "I saw a crochet blanket at the market for a fortune."],
    "dog": ["The shelter on Elm Street is hosting an open house.", "My uncle used to bet on racing at the track."],
    "cat": ["The vet down the road has a kitten on its sign.", "A stray cat sleeps on our car every night."],
    "parrot": ["A coworker gave me a plant when she left.", "The fish tank at the dentist has one sad goldfish."],
    "lisbon": ["A trip to Portugal is on my mother's wish list.", "The gates at the stadium opened an hour late."],
    "camping": ["We had a picnic by the river on Sunday.", "My brother hiked up a hill and called it a mountain."],
    "roadtrip": ["The coast guard closed the beach for a day.", "A work trip to Milan got cancelled last minute."],
    "promotion": ["I can never remember the title of that song.", "My manager changed the team's standup to nine."],
    "newjob": ["A startup on my street delivers groceries by bike.", "My aunt worked at a hospital for thirty years."],
    "bakery": ["The farmers market sells the best peaches.", "My friend's online shop sells vintage jackets."],
    "move": ["The house next door finally sold.", "The lease on my car runs out in the spring."],
    "renovation": ["The bathroom at the office flooded again.", "Our kitchen is so small we eat standing."],
    "wedding": ["My coworker's wedding had a taco truck.",
                "Marriage is hard work, my aunt always says.",
                "I burned the toast this morning, the alarm went off."],
    "baby": ["My neighbor's twins started kindergarten.", "My sister babysits for her friends on weekends."],
    "grandma": ["My grandmother's ninetieth was a year ago, she still talks about it.",
                "The anniversary sale at the mall is on."],
    "injury": ["My dad's knee has been bad for years.", "The cast of that new show is fantastic."],
    "health": ["My doctor is allergic to cats, she told me once.", "The checkup for my car was expensive."],
    "car": ["Electric scooters are everywhere downtown now.",
            "The motor on my uncle's boat died in the middle of the lake.",
            "The safety course for the forklift was mandatory at work."],
    "bike": ["We took a ride on the ferry last Sunday.", "An e-bike nearly ran me over on the sidewalk."],
    "spanish": ["The evening class at the gym is always full.",
                "My tutor from college just wrote a book on language learning."],
    "coding": ["A bootcamp for dogs opened near the park, no joke.", "I took an online quiz about my personality."],
    "driving": ["The airfield outside town does a pancake breakfast.",
                "Parking lessons should be mandatory for my neighbor."],
    "volunteer": ["The food bank near me needs more freezers.", "The animal shelter calendar is on my fridge."],
}

# how to ask "what {category} did S ... in {month}?" without the evidence's words
TEMPORAL = {
    "hobby": ["What pastime did {S} pick up in {M}?", "Which new hobby did {S} mention in {M}?",
              "What leisure activity did {S} start in {M}?"],
    "pet": ["What animal did {S} get in {M}?", "Which pet arrived at {S}'s home in {M}?"],
    "travel": ["Where did {S} go in {M}?", "What trip did {S} talk about in {M}?"],
    "work": ["What job news did {S} share in {M}?", "What changed in {S}'s career in {M}?"],
    "home": ["What housing news did {S} have in {M}?", "What was happening with {S}'s home in {M}?"],
    "family": ["What family news did {S} share in {M}?", "What happened among {S}'s relatives in {M}?"],
    "health": ["What health problem did {S} mention in {M}?", "What medical news did {S} have in {M}?"],
    "purchase": ["What big purchase did {S} make in {M}?", "What did {S} buy in {M}?"],
    "learning": ["What did {S} begin studying in {M}?", "What training did {S} start in {M}?"],
    "volunteering": ["What did {S} start doing for others in {M}?"],
}

# what the other speaker says to bring a subject up: the question's own words, never an answer
PROMPTS = {
    "hobby": ["Have you picked up any new hobby lately, {S}?", "You said you wanted a pastime that isn't screens.",
              "What do you do for fun these days?"],
    "pet": ["Are you still thinking about getting a pet?", "Do you want an animal at home one day, {S}?"],
    "travel": ["Are you going anywhere this year?", "Where would you go if you could travel anywhere?"],
    "work": ["How is work, {S}? Any news at the company?", "Are you still happy with your job?"],
    "home": ["Is your place still too small?", "Do you ever think about moving?"],
    "family": ["How is your family doing?", "Any news from your relatives, {S}?"],
    "health": ["How are you feeling these days?", "Did you ever go to that checkup?"],
    "purchase": ["Did you buy anything fun lately?", "Are you still saving up for something big?"],
    "learning": ["Are you studying anything new, {S}?", "You always said you wanted to learn something new."],
    "volunteering": ["Do you still want to help out somewhere?", "Have you found a way to give back?"],
}

REACTIONS = [
    "No way, that's amazing!", "Wow, good for you.", "Oh, how did that come about?", "That's huge, {S}!",
    "I love that for you.", "Tell me everything.", "That sounds like a lot, but exciting.",
    "Oh wow, I didn't see that coming.", "Congrats, really.", "Ha, I knew you would do it eventually.",
    "How are you feeling about it?", "That's so you, {S}.",
]

OPENERS = [
    "Hey {O}! It's been a while, how are you?", "Hi {O}, good to hear from you.",
    "{O}! Finally, I was about to text you.", "Morning {O}, do you have a minute to catch up?",
    "Hey, sorry I went quiet for a bit.", "Hi! How was your week, {O}?",
]
CLOSERS = [
    "Anyway, I should go, talk soon {O}!", "Okay, dinner is ready, bye for now.",
    "Let's catch up again soon.", "Good talking to you, {O}.", "Take care, talk next week!",
    "I have to run, but this was nice.",
]
FILLER = [
    "Haha, yes.", "Same here honestly.", "Oh totally.", "Right?", "I know what you mean.",
    "That makes sense.", "Ugh, I feel that.", "Ha! Classic.", "Fair enough.", "Sounds lovely.",
    "The weather has been so grey lately.", "I slept terribly last night.", "I'm on my third coffee already.",
    "Work has been a lot this week.", "I binged the whole season of that detective show.",
    "We ordered pizza again, no regrets.", "My phone battery dies by noon now.",
    "I can't believe it's already {M}.", "Traffic was awful this morning.", "I need a vacation from my vacation.",
    "Did you see the game on Sunday?", "I made pancakes this morning, {O}.", "Honestly I just want a quiet weekend.",
    "The new season starts in {M2}, I think.", "I keep forgetting to call my dentist.",
    "We had friends over on Saturday, it was fun.", "My inbox is a disaster.", "I'm trying to drink more water.",
    "It rained the whole weekend.", "I found a great podcast about history.",
    "I cleaned the whole apartment yesterday.",
    "What are you up to this weekend?", "Nothing much new here, to be honest.", "I started a new book but I'm bored.",
    "My cousin is visiting in {M2}.", "Do you remember that cafe we liked?", "That's what I keep telling myself.",
    "Long day, long week.", "I made soup for the whole week.", "Honestly, same, {O}.",
    "We should plan something for {M2}.", "I started watching a cooking show, it's very calming.",
    "Oh, I forgot to tell you something funny.", "My neighbor waved at me today, progress.",
    "The heat this week was unbearable.", "I have a dentist appointment in {M2}.",
    "My sister called, nothing new, just chatting.", "I'm so tired of meetings.", "I need new shoes.",
]


@dataclass
class Event:
    topic: str
    speaker: str
    session: int
    variant: int
    phase: str  # "said" or "later"
    turn_id: str = ""


@dataclass
class Plan:
    events: list[Event] = field(default_factory=list)


def month_name(d: date) -> str:
    return calendar.month_name[d.month]


def session_dates(rng: random.Random) -> list[date]:
    year, month = rng.choice([2022, 2023]), rng.randint(1, 12)
    dates = []
    for _ in range(SESSIONS):
        dates.append(date(year, month, rng.randint(1, 28)))
        month += 1
        if month > 12:
            year, month = year + 1, 1
    return dates


def plan_conversation(rng: random.Random, speakers: list[str]) -> tuple[Plan, list[tuple[str, list[Event], dict]]]:
    """Events per session and the questions about them: (kind, evidence events, query or template);
    the evidence's turn ids are known once the turns exist."""
    names = list(TOPICS)
    rng.shuffle(names)
    fact, both, multi = (names[:FACT_TOPICS], names[FACT_TOPICS:FACT_TOPICS + SPEAKER_TOPICS],
                         names[FACT_TOPICS + SPEAKER_TOPICS:FACT_TOPICS + SPEAKER_TOPICS + MULTI_TOPICS])
    plan = Plan()
    busy: set[tuple[str, str, int]] = set()  # (speaker, category, session): at most one event of each

    def place(name: str, speaker: str, variant: int, phase: str, lo: int = 0, hi: int = SESSIONS - 1) -> Event:
        category = TOPICS[name].category
        choices = [s for s in range(lo, hi + 1) if (speaker, category, s) not in busy]
        session = rng.choice(choices)
        busy.add((speaker, category, session))
        event = Event(name, speaker, session, variant, phase)
        plan.events.append(event)
        return event

    asks = []
    for name in fact:
        speaker = rng.choice(speakers)
        event = place(name, speaker, rng.randrange(len(TOPICS[name].said)), "said")
        asks.append(("fact", [event], {"query": _ask_about(rng, event)}))
    for name in both:
        first = rng.randrange(2)
        for speaker, variant in zip(speakers, (first, 1 - first)):
            event = place(name, speaker, variant, "said")
            asks.append(("speaker", [event], {"query": _ask_about(rng, event)}))
    for name in multi:
        speaker = rng.choice(speakers)
        start = place(name, speaker, 0, "said", 0, SESSIONS - 4)  # `later` follows the first telling
        end = place(name, speaker, 0, "later", start.session + 2, SESSIONS - 1)
        asks.append(("multi_session", [start, end], {"query": rng.choice(TOPICS[name].asked_both).format(S=speaker)}))
    said = [e for e in plan.events if e.phase == "said"]
    for event in rng.sample(said, TEMPORAL_QUESTIONS):
        asks.append(("temporal", [event], {"template": rng.choice(TEMPORAL[TOPICS[event.topic].category])}))
    return plan, asks


def _ask_about(rng: random.Random, event: Event) -> str:
    """A paraphrase with no word of the evidence, or (as often) one that keeps one or two."""
    pool = HINTED[event.topic][event.variant] if rng.random() < HINT_SHARE else TOPICS[event.topic].asked
    return rng.choice(pool).format(S=event.speaker)


def build_conversation(rng: random.Random, number: int, speakers: list[str]) -> tuple[dict, list[dict]]:
    plan, asks = plan_conversation(rng, speakers)
    dates = session_dates(rng)
    used = sorted({e.topic for e in plan.events})
    # every near line and echo of the conversation's topics is said once, in a random session
    placed: list[list[str]] = [[] for _ in dates]
    for line in [line for name in used for line in TOPICS[name].near + tuple(ECHOES[name])]:
        placed[rng.randrange(SESSIONS)].append(line)
    near_pool = [line for name in TOPICS if name not in used for line in TOPICS[name].near]
    categories = sorted({TOPICS[e.topic].category for e in plan.events})
    sessions = []
    cid = f"c{number:02d}"
    for s, day in enumerate(dates):
        other_month = month_name(dates[(s + rng.randint(1, SESSIONS - 1)) % SESSIONS])
        length = rng.randint(*TURNS_PER_SESSION)
        first = rng.randrange(2)
        speaker_at = [speakers[(first + i) % 2] for i in range(length)]
        lines: list[tuple[str, Event | None] | None] = [None] * length
        events = [e for e in plan.events if e.session == s]
        for event in events:
            slots = [i for i in range(2, length - 2) if speaker_at[i] == event.speaker
                     and lines[i] is None and lines[i + 1] is None]
            i = rng.choice(slots)
            lines[i] = (_event_text(event, speakers, rng), event)
            lines[i + 1] = (rng.choice(REACTIONS).format(S=event.speaker), None)
        free = [i for i in range(1, length - 1) if lines[i] is None]
        chosen = rng.sample(free, min(len(free), max(len(placed[s]), rng.randint(*DISTRACTORS_PER_SESSION))))
        for i, line in zip(chosen, placed[s]):
            lines[i] = (line, None)
        for i in chosen[len(placed[s]):]:
            if rng.random() < 0.35:
                other = speakers[1 - speakers.index(speaker_at[i])]
                lines[i] = (rng.choice(PROMPTS[rng.choice(categories)]).format(S=other), None)
            else:
                lines[i] = (rng.choice(near_pool), None)
        turns = []
        for i in range(length):
            speaker = speaker_at[i]
            other = speakers[1 - speakers.index(speaker)]
            if lines[i] is not None:
                text, event = lines[i]
            elif i == 0:
                text, event = rng.choice(OPENERS).format(O=other), None
            elif i == length - 1:
                text, event = rng.choice(CLOSERS).format(O=other), None
            else:
                text = rng.choice(FILLER).format(O=other, M=month_name(day), M2=other_month)
                event = None
            turn_id = f"{cid}-s{s + 1:02d}-t{i + 1:03d}"
            if event is not None:
                event.turn_id = turn_id
            turns.append({"id": turn_id, "speaker": speaker, "text": text})
        sessions.append({"id": f"{cid}-s{s + 1:02d}", "date": day.isoformat(), "turns": turns})
    questions = []
    for n, (kind, events, spec) in enumerate(asks, start=1):
        query = spec.get("query") or spec["template"].format(S=events[0].speaker,
                                                             M=month_name(dates[events[0].session]))
        questions.append({"id": f"{cid}-q{n:02d}", "conversation": cid, "kind": kind, "query": query,
                          "evidence": [e.turn_id for e in events]})
    return {"id": cid, "split": "dev" if number % 2 else "test", "speakers": speakers, "sessions": sessions}, questions


def _event_text(event: Event, speakers: list[str], rng: random.Random) -> str:
    t = TOPICS[event.topic]
    text = t.said[event.variant] if event.phase == "said" else rng.choice(t.later)
    if rng.random() < 0.3:  # addressing the other speaker by name, as people do
        other = speakers[1 - speakers.index(event.speaker)]
        keep = text[:2] in ("I ", "I'")
        text = f"{other}, {text if keep else text[0].lower() + text[1:]}"
    return text


DESCRIPTION = (
    "A hard development set for memsvc's retrieval, built by eval/build_conversations.py (stdlib, "
    f"seeded RNG {SEED}, no LLM). {CONVERSATIONS} two-speaker conversations (speaker names drawn from a "
    f"list of {len(NAMES)}, never reused), each {SESSIONS} sessions one month apart with "
    f"{TURNS_PER_SESSION[0]}..{TURNS_PER_SESSION[1]} turns. Each conversation draws "
    f"{FACT_TOPICS + SPEAKER_TOPICS + MULTI_TOPICS} "
    f"of {len(TOPICS)} hand-written topics (hobbies, pets, trips, work, home, family, health, "
    "purchases, learning, volunteering), each told in the first person in one turn. Questions are "
    "hand-written paraphrases that avoid the evidence's words: fact (one speaker's event), speaker (both "
    "speakers had an event on the same topic in different sessions; the question names one), temporal "
    "(the question names only the event's category and the session's month), multi_session (a start and "
    "a later outcome in two sessions: two evidence turns). The rest of each session is distractors: lines "
    "sharing the topics' nouns that state other facts (every such line of the conversation's topics is said "
    "once, and so is a line echoing each word a question keeps from its evidence), the other speaker "
    "asking about the category in the "
    "question's words, filler chit-chat mentioning other months. Split dev/test by conversation "
    "(odd ids dev, even ids test). Evidence ids are turn ids; a question's answer is in its evidence turns."
)


def build() -> dict:
    rng = random.Random(SEED)
    names = NAMES[:]
    rng.shuffle(names)
    conversations, questions = [], []
    for number in range(1, CONVERSATIONS + 1):
        speakers = names[2 * (number - 1): 2 * number]
        conversation, asked = build_conversation(rng, number, speakers)
        conversations.append(conversation)
        questions += asked
    return {"version": "1.1.0", "description": DESCRIPTION, "conversations": conversations, "questions": questions}


if __name__ == "__main__":
    OUT.write_text(json.dumps(build(), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")
